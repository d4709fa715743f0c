"""The speed benchmark's harness CPU: a process's own time, its children's left out."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchmarks.bench_speed import own_cpu_s

pytestmark = pytest.mark.process

BURN = "import time\nwhile time.process_time() < {s}: pass\n"


def test_an_exited_process_tells_its_own_cpu_apart_from_its_childrens() -> None:
    # The parent burns 0.3 s itself after its child burned 0.6 s; waited for with
    # WNOWAIT, it is not reaped yet and its /proc entry still counts.
    code = (
        "import subprocess, sys\n"
        f"subprocess.run([sys.executable, '-c', {BURN.format(s=0.6)!r}], check=True)\n"
        + BURN.format(s=0.3)
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        own = own_cpu_s(proc.pid)
    finally:
        proc.wait()
    assert proc.returncode == 0
    # Its own 0.3 s (process_time counts its start-up in it), never the child's 0.6 s.
    # /proc gives user and system time each rounded down to a clock tick, so the sum
    # may read up to two ticks short (CI run 25 read 0.29).
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert 0.3 - 2 * tick <= own < 0.6, own
