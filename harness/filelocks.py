"""Write locks on files held by a set of processes, from the kernel's ``/proc/locks``.

A worker stopped while one of its threads holds a write lock on a file (SQLite takes one
for each write transaction: a lease renewal, on the ledger) keeps every other worker out
of that file until it is resumed. No other worker can then take its job over, and a
cell that needs one is unreachable by chance, not by the worker's design.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

#: Where the kernel lists every file lock, one per line.
PROC_LOCKS = Path("/proc/locks")


def write_locks(pids: Collection[int], text: str) -> list[str]:
    """The lines of ``text`` (``/proc/locks``) that are write locks held by one of ``pids``.

    A line reads ``1: POSIX  ADVISORY  WRITE 4242 08:01:131 120 120``; lines for locks
    others wait on (``1: -> POSIX ...``) carry the arrow and are not held.
    """
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 5 or fields[1] == "->":
            continue
        if fields[3] == "WRITE" and fields[4].isdigit() and int(fields[4]) in pids:
            out.append(line.strip())
    return out


def held_write_locks(pids: Collection[int]) -> list[str]:
    """The write locks ``pids`` hold now; none where the kernel does not list them."""
    try:
        return write_locks(pids, PROC_LOCKS.read_text())
    except OSError:
        return []
