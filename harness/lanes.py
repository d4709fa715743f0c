"""Which trial worker a process is: failpoint hits know only pids, the timeline wants names.

The trial starts each worker through :meth:`WorkerNames.start`, which registers the new
pid under the same lock a lookup of an unknown pid waits for: a worker fast enough to
reach its first failpoint before ``start`` returns is still named by its lane.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, TypeVar

import psutil


class _Started(Protocol):
    @property
    def pid(self) -> int: ...


H = TypeVar("H", bound=_Started)


class WorkerNames:
    """pid -> worker name for one trial."""

    def __init__(self) -> None:
        self._starting = threading.Lock()
        self._lock = threading.Lock()
        self._names: dict[int, str] = {}

    def start(self, name: str, launch: Callable[[], H]) -> H:
        """Run ``launch`` (which starts worker ``name``) and register its pid."""
        with self._starting:
            handle = launch()
            with self._lock:
                self._names[handle.pid] = name
        return handle

    def name_of(self, pid: int | None, peer_pid: int | None) -> str | None:
        """The worker that reported ``pid`` over a socket whose peer is ``peer_pid``.

        A container worker's own pid means nothing here; the peer pid (the kernel's
        view from the host) does. A process the worker started is named by its worker.
        """
        # The kernel's pid when it told us one: it is the host's, whatever the worker says.
        host_pid = peer_pid if peer_pid is not None else pid
        if host_pid is None:
            return None
        found = self._lookup(host_pid)
        if found is None:
            with self._starting:  # a start in progress may be about to register it
                found = self._lookup(host_pid) or self._ancestor(host_pid)
        return found

    def _lookup(self, pid: int) -> str | None:
        with self._lock:
            return self._names.get(pid)

    def _ancestor(self, pid: int) -> str | None:
        if pid <= 0:
            return None
        try:
            parents = psutil.Process(pid).parents()
        except psutil.Error:
            return None
        with self._lock:
            for parent in parents:
                if parent.pid in self._names:
                    return self._names[parent.pid]
        return None
