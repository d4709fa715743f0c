"""A wait for a worker is stretched by the time its tasks waited for a CPU (no processes:
the kernel's counts are given)."""

from __future__ import annotations

import os

from harness.cpu_wait import CpuWait, task_waits

MS = 1_000_000  # nanoseconds


class _Counts:
    """Each process's tasks and their CPU wait in ns, as the kernel would report them."""

    def __init__(self) -> None:
        self.by_pid: dict[int, dict[int, int]] = {}

    def read(self, pid: int) -> dict[int, int]:
        return dict(self.by_pid.get(pid, {}))


def test_the_most_delayed_task_since_the_start_is_the_stretch() -> None:
    counts = _Counts()
    counts.by_pid = {10: {10: 500 * MS, 11: 40 * MS}, 20: {20: 0}}
    wait = CpuWait(lambda: [10, 20], read=counts.read)
    assert wait.waited_s() == 0.0  # what was waited before the start does not count
    counts.by_pid = {10: {10: 900 * MS, 11: 90 * MS}, 20: {20: 300 * MS}}
    assert wait.waited_s() == 0.4  # task 10: 400 ms, overlapping the others' waits


def test_a_task_born_later_counts_from_nothing_and_an_exited_one_keeps_its_wait() -> None:
    counts = _Counts()
    counts.by_pid = {10: {10: 0}}
    pids = [10]
    wait = CpuWait(lambda: pids, read=counts.read)
    counts.by_pid = {10: {10: 100 * MS}, 30: {30: 250 * MS}}
    pids.append(30)  # a child the worker started
    assert wait.waited_s() == 0.25
    counts.by_pid = {10: {10: 120 * MS}}  # the child exited
    assert wait.waited_s() == 0.25


def test_the_counts_of_this_process_are_read_and_a_missing_one_reads_as_none() -> None:
    mine = task_waits(os.getpid())
    assert os.getpid() in mine or mine == {}  # {} where the kernel keeps no counts
    assert task_waits(2**22 + 1) == {}  # above the largest pid Linux hands out
