"""A worker stopped while it holds a write lock on a file is let go and stopped again.

SQLite takes such a lock for every write transaction: a worker stopped inside a lease
renewal would keep every other worker off the ledger, and no takeover could happen.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.filelocks import held_write_locks, write_locks
from harness.history import History
from harness.trial import Trial

pytestmark = pytest.mark.process

# Holds a write lock half of the time, 50 ms at a go, as a busy ledger's writer would.
LOCKER = """
import fcntl, sys, time
f = open(sys.argv[1], "a+")
print("ready", flush=True)
while True:
    fcntl.lockf(f, fcntl.LOCK_EX)
    time.sleep(0.05)
    fcntl.lockf(f, fcntl.LOCK_UN)
    time.sleep(0.05)
"""


class Handle:
    name = "w1"
    exited_at = None

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def pause(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def tree(self) -> list[int]:
        return [self.pid]


class Supervisor:
    """The part of a trial that stops workers."""

    def __init__(self) -> None:
        self.history = History()
        self.paused: set[str] = set()

    send = Trial.send
    stop_clear_of_write_locks = Trial.stop_clear_of_write_locks


def test_a_stopped_worker_is_left_stopped_only_once_it_holds_no_write_lock(
    tmp_path: Path,
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(tmp_path / "ledger")], stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        handle, trial = Handle(proc.pid), Supervisor()
        for _ in range(20):
            trial.send(handle, "SIGSTOP")  # type: ignore[arg-type]
            trial.stop_clear_of_write_locks(handle)  # type: ignore[arg-type]
            assert held_write_locks({proc.pid}) == []
            trial.send(handle, "SIGCONT")  # type: ignore[arg-type]
            time.sleep(0.03)  # the worker runs on between stops, as a trial's would
        notes: list[Any] = [e for e in trial.history.events() if e.kind == "note"]
        # Half of the stops land inside the lock: the retry ran, and says so.
        assert notes, "no stop landed inside the lock"
        assert all("holding a write lock" in e.fields["text"] for e in notes)
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_only_write_locks_held_by_the_pids_are_read() -> None:
    text = (
        "1: POSIX  ADVISORY  WRITE 4242 08:01:131 120 120\n"
        "1: -> POSIX  ADVISORY  WRITE 4343 08:01:131 120 120\n"
        "2: POSIX  ADVISORY  READ  4242 08:01:131 128 128\n"
        "3: FLOCK  ADVISORY  WRITE 5151 00:1a:77 0 EOF\n"
    )
    assert write_locks({4242}, text) == ["1: POSIX  ADVISORY  WRITE 4242 08:01:131 120 120"]
    assert write_locks({4343}, text) == [], "a lock waited for is not held"
    assert write_locks({5151}, text) == ["3: FLOCK  ADVISORY  WRITE 5151 00:1a:77 0 EOF"]
    assert write_locks({1}, text) == []
