"""The fallback containment of local workers: process groups plus psutil descendants.

Each worker leads its own session and process group. Signals go to the group
(``killpg``, atomic for every member) and to every descendant psutil has seen, so a
child that called ``setsid`` still gets them, provided it was seen: a double fork that
finishes between two looks escapes. That is why :mod:`harness.backends.cgroup` is used
wherever the machine allows.

While the leader's zombie exists its pid, and so its process group id, cannot be reused,
so a ``killpg`` before :meth:`GroupTree.release` can never reach a stranger.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

import psutil

from harness.backends.cgroup import PROCESS_GROUP


class GroupTree:
    """A worker's tree as its process group and seen descendants; see
    :class:`harness.backends.process.Tree`."""

    kind = PROCESS_GROUP

    def __init__(self, pid: int, exited: threading.Event) -> None:
        self.pid = pid
        self._exited = exited
        self._released = False
        # Every descendant ever seen, so signals reach those that left the process group.
        self._seen: dict[int, psutil.Process] = {}

    def send(self, sig: int) -> None:
        self._refresh()
        if not self._released:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, sig)
        for proc in self._seen.values():
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)  # psutil refuses if the pid was reused

    def pids(self) -> list[int]:
        self._refresh()
        return [p.pid for p in self._seen.values() if running(p)]

    def release(self) -> None:
        """The leader was reaped: its pgid may name a stranger's group from now on."""
        self._released = True

    def settle(self, timeout_s: float) -> bool:
        """Wait until every seen descendant is gone (a kill only queues the signal)."""
        deadline = time.monotonic() + timeout_s
        while any(running(p) for p in self._seen.values()):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def _refresh(self) -> None:
        if self._exited.is_set():
            return  # the zombie has no children left to list
        try:
            for child in psutil.Process(self.pid).children(recursive=True):
                self._seen.setdefault(child.pid, child)
        except psutil.Error:
            pass


def running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
