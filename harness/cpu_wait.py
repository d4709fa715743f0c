"""How long processes waited for a CPU: the part of a wait a loaded machine took from them.

Linux counts, for every task (thread), the time it was ready to run but not running
(``/proc/PID/task/TID/schedstat``, its second field, in nanoseconds; CPU quotas count
too). A bound that waits for a worker to act, stretched by the longest such wait of any
of its tasks, bounds the worker's own progress, not the machine's speed: at load 20 a
worker that polls every 20 ms still looks at its queue, only later. Where the counts
cannot be read (not Linux, a process gone), nothing is added and the bound is as given.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path

#: The counts of one process: each of its tasks' time spent waiting for a CPU, in ns.
Read = Callable[[int], dict[int, int]]


def task_waits(pid: int) -> dict[int, int]:
    """Each task of ``pid`` and the nanoseconds it has waited for a CPU so far; empty when
    the process is gone or the kernel keeps no such counts."""
    out: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                out[int(task.name)] = int((task / "schedstat").read_text().split()[1])
    return out


class CpuWait:
    """The CPU wait of the processes ``pids()`` names, since this object was made (or
    since each task began): the longest any one task waited (tasks run side by side, so
    their waits overlap)."""

    def __init__(
        self,
        pids: Callable[[], Iterable[int]],
        *,
        read: Read = task_waits,
        from_birth: bool = False,
    ) -> None:
        self._pids = pids
        self._read = read
        #: Each task's count when first seen: a task born later starts from nothing, and
        #: ``from_birth`` counts every task from its start (processes that began within
        #: the span measured, whose counts are read only at its end).
        self._base = {} if from_birth else self._sample()
        self._most = 0

    def _sample(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for pid in set(self._pids()):
            counts.update(self._read(pid))
        return counts

    def waited_s(self) -> float:
        """Seconds the most delayed task waited for a CPU since the start; never less than
        an earlier answer (a task that exited keeps what it waited)."""
        for tid, ns in self._sample().items():
            self._most = max(self._most, ns - self._base.setdefault(tid, 0))
        return self._most / 1e9
