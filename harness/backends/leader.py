"""The top process of a local worker, however it was started: the seam between
:class:`harness.backends.process.ProcessHandle` and the process that is its parent.

Whoever is the leader's parent observes its exit without reaping it (``waitid`` with
``WNOWAIT``), so its pid, and so its process group id, stay taken until :meth:`Leader.reap`:
the harness itself for a worker it started (:class:`PopenLeader`), or the run's zygote
for one forked from preloaded modules (:class:`harness.backends.zygote.ZygoteChild`).
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class LeaderExit:
    """How the leader ended: the status as :mod:`subprocess` counts it (``-N``: signal
    ``N``), the monotonic time its exit was seen, and what else the history should say."""

    returncode: int
    t: float
    note: str = ""


class Leader(Protocol):
    @property
    def pid(self) -> int: ...

    def wait_exit(self) -> LeaderExit:
        """Block until the leader has exited; its zombie stays."""
        ...

    def reap(self) -> None:
        """Release the zombie (called once, after :meth:`wait_exit` returned)."""
        ...


class PopenLeader:
    """A worker the harness started itself."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc

    @property
    def pid(self) -> int:
        return self._proc.pid

    def wait_exit(self) -> LeaderExit:
        info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        t = time.monotonic()
        assert info is not None  # None only with WNOHANG
        code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        return LeaderExit(code, t)

    def reap(self) -> None:
        self._proc.wait()
