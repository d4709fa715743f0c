"""The heavy target's framework (benchmarks/bench_heavy.py): importing it spends half a
second of this process's CPU, as importing a large SDK does, and like an import it is
paid once per process: a worker forked from a process that imported it pays nothing."""

from __future__ import annotations

import time

#: CPU seconds an import costs.
START_CPU_S = 0.5


def burn(cpu_s: float) -> None:
    """Spend ``cpu_s`` of this process's CPU time: on a loaded machine, longer by the wall."""
    until = time.process_time() + cpu_s
    while time.process_time() < until:
        pass


burn(START_CPU_S)
