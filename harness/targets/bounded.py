"""A target's own command (enqueue, status) run to the harness's bound, which a loaded
machine stretches: the time the command waited for a CPU is the machine's, not its.

A command that sleeps or hangs still runs out at the bound and is a configuration error;
one that is only starved (Python or Node.js starting at load 25 can take seconds of CPU
queueing) gets that long more, at most :data:`MOST_STARVED_S`.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import psutil

from harness.cpu_wait import CpuWait, Read, task_waits

#: The most a command's bound is stretched by: the trial's own bound
#: (``TrialConfig.quiescence_timeout_s``), so a starved command cannot hold a trial longer.
MOST_STARVED_S = 20.0
#: Past the bound, each further wait is this long before the CPU wait is read again.
LOOK_S = 0.25
#: How much of a failing command's stderr its one-line error carries.
STDERR_TAIL_LINES = 3
STDERR_TAIL_CHARS = 400


class Overran(Exception):
    """The command outlived its bound, and ``more_s`` more for the time it was starved."""

    def __init__(self, more_s: float) -> None:
        super().__init__(f"ran past its bound, and {more_s:.1f} s more")
        self.more_s = more_s


def run_bounded(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None,
    timeout_s: float,
    most_s: float = MOST_STARVED_S,
    read: Read = task_waits,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``argv`` with its output captured; :class:`Overran` (the command killed) when
    it outlives ``timeout_s`` plus the time its processes waited for a CPU (``read``)."""
    start = time.monotonic()
    with subprocess.Popen(
        list(argv), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        try:
            try:
                out, err = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                out, err = _while_starved(proc, start + timeout_s, most_s, read)
        except BaseException:
            proc.kill()  # a Ctrl-C here must not wait for the command (as subprocess.run)
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _while_starved(
    proc: subprocess.Popen[bytes], due: float, most_s: float, read: Read
) -> tuple[bytes, bytes]:
    # Read only now that the bound has passed: the command began within it, so its
    # tasks' counts from birth are all this run's.
    cpu = CpuWait(lambda: _tree(proc.pid), read=read, from_birth=True)
    waited = 0.0
    while True:
        waited = min(cpu.waited_s(), most_s)
        left = due + waited - time.monotonic()
        if left <= 0:
            proc.kill()
            proc.communicate()
            raise Overran(waited)
        with contextlib.suppress(subprocess.TimeoutExpired):
            return proc.communicate(timeout=min(left, LOOK_S))


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (a command may be a shell running the real one)."""
    try:
        return [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        return [pid]


def stderr_tail(stderr: bytes) -> str:
    """`` (stderr: ...)`` with the last non-empty lines joined by `` | ``, on one line."""
    lines = [ln.strip() for ln in stderr.decode(errors="replace").splitlines() if ln.strip()]
    if not lines:
        return " (nothing on stderr)"
    tail = " | ".join(lines[-STDERR_TAIL_LINES:])
    if len(tail) > STDERR_TAIL_CHARS:
        tail = "..." + tail[-STDERR_TAIL_CHARS:]
    return f" (stderr, last lines: {tail})"
