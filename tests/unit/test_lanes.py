"""Naming a failpoint hit's lane from its pids, without sockets."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from harness.lanes import WorkerNames


@dataclass
class Handle:
    pid: int


def test_a_registered_pid_is_named_by_its_worker() -> None:
    names = WorkerNames()
    names.start("w1", lambda: Handle(4242))
    assert names.name_of(4242, 4242) == "w1"
    assert names.name_of(7, 4242) == "w1", "the kernel's peer pid wins over a container's own"
    assert names.name_of(4242, None) == "w1"
    assert names.name_of(None, None) is None


def test_a_process_the_worker_started_is_named_by_its_worker() -> None:
    names = WorkerNames()
    names.start("w1", lambda: Handle(os.getppid()))
    assert names.name_of(1, os.getpid()) == "w1"


def test_a_lookup_during_a_start_waits_for_its_registration() -> None:
    looked = threading.Event()

    class Watched(WorkerNames):
        def _lookup(self, pid: int) -> str | None:
            found = super()._lookup(pid)
            looked.set()
            return found

    names = Watched()
    found: list[str | None] = []
    asking = threading.Thread(target=lambda: found.append(names.name_of(5151, 5151)))

    def launch() -> Handle:
        # The worker runs and asks for its name before start() has registered it.
        asking.start()
        assert looked.wait(5), "the lookup never ran"
        return Handle(5151)

    names.start("w3", launch)
    asking.join(5)
    assert found == ["w3"]
