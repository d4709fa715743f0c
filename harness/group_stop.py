"""Ending a helper process that leads its own process group and reads requests on its
stdin (a served command, the run's zygote): EOF first, so it can finish in order."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def end_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """Close ``proc``'s stdin, then SIGTERM, then SIGKILL its process group, each after
    ``grace_s`` without an exit; once it has exited, SIGKILL whatever it left in its
    group (the leader's zombie, reaped last, pins the group's id until then)."""
    assert proc.stdin is not None
    with contextlib.suppress(OSError):
        proc.stdin.close()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, sig)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            continue
        if sig is None:
            # It exited on its own; whatever it left behind in its group goes too.
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
        break
