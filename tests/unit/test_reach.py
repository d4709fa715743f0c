"""A boundary's bound is stretched by the time the workers waited for a CPU, and only by it."""

from __future__ import annotations

import threading

import pytest

from harness.contract.errors import RendezvousTimeout
from harness.cpu_wait import CpuWait
from harness.reach import within_reach


class _Machine:
    """A clock that moves only when waited on, a hit that comes at ``hit_at`` (or never),
    and workers whose one task has waited ``starved_s`` for a CPU."""

    def __init__(self, *, hit_at: float | None, starved_s: float = 0.0) -> None:
        self.now = 0.0
        self.hit_at = hit_at
        self.starved_s = starved_s
        self.samples = 0

    def clock(self) -> float:
        return self.now

    def wait(self, timeout_s: float) -> str:
        if self.hit_at is not None and self.now + timeout_s >= self.hit_at:
            self.now = max(self.now, self.hit_at)
            return "hit"
        self.now += timeout_s
        raise RendezvousTimeout(f"no worker reached it within {timeout_s:g} s")

    def cpu_wait(self) -> CpuWait:
        self.samples += 1
        return CpuWait(
            lambda: [1], read=lambda pid: {1: int(self.starved_s * 1e9)}, from_birth=True
        )

    def reach(self, bound_s: float = 10.0, *, most_s: float = 20.0, abort: bool = False) -> str:
        stop = threading.Event()
        if abort:
            stop.set()
        return within_reach(
            self.wait, bound_s, starved=self.cpu_wait, most_s=most_s, abort=stop, clock=self.clock
        )


def test_a_boundary_reached_in_time_reads_no_cpu_counts() -> None:
    m = _Machine(hit_at=3.0, starved_s=5.0)
    assert m.reach() == "hit"
    assert m.samples == 0


def test_an_unstarved_worker_gets_the_bound_and_the_first_timeout() -> None:
    m = _Machine(hit_at=None)
    with pytest.raises(RendezvousTimeout, match=r"^no worker reached it within 10 s$"):
        m.reach()
    assert m.now == 10.0


def test_a_starved_worker_reaching_late_is_waited_for() -> None:
    m = _Machine(hit_at=12.5, starved_s=3.0)
    assert m.reach() == "hit"
    assert m.now == 12.5


def test_a_starved_worker_that_never_reaches_gets_only_its_cpu_wait_more() -> None:
    m = _Machine(hit_at=None, starved_s=3.0)
    with pytest.raises(RendezvousTimeout, match=r"within 10 s; nor in the 3\.0 s more"):
        m.reach()
    assert m.now == pytest.approx(13.0)


def test_the_stretch_is_capped_by_the_trials_limit() -> None:
    m = _Machine(hit_at=None, starved_s=100.0)
    with pytest.raises(RendezvousTimeout, match=r"nor in the 5\.0 s more"):
        m.reach(most_s=5.0)
    assert m.now == pytest.approx(15.0)


def test_an_aborted_run_is_not_given_more() -> None:
    m = _Machine(hit_at=12.0, starved_s=3.0)
    with pytest.raises(RendezvousTimeout, match=r"^no worker reached it within 10 s$"):
        m.reach(abort=True)
    assert m.now == 10.0
