"""python3 start.py SECONDS SCRIPT [ARG ...]: spend SECONDS of CPU, then run SCRIPT.

The heavy target's start-up (benchmarks/bench_heavy.py): a framework that costs half a
second of CPU to import, stood in for by a busy loop, before the test suite's pyqueue
worker, enqueue or status command (or serve.py here) runs as it always does.
"""

from __future__ import annotations

import runpy
import sys
import time
from pathlib import Path


def burn(cpu_s: float) -> None:
    """Spend ``cpu_s`` of this process's CPU time: on a loaded machine, longer by the wall."""
    until = time.process_time() + cpu_s
    while time.process_time() < until:
        pass


if __name__ == "__main__":
    burn(float(sys.argv[1]))
    script = Path(sys.argv[2])
    sys.argv = sys.argv[2:]
    sys.path.insert(0, str(script.parent))
    runpy.run_path(str(script), run_name="__main__")
