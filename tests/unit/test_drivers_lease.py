"""A held request is released within the lease of the attempt that sent it, counted from
when that attempt took its lease, never from the hold (no processes, no sleeps)."""

from __future__ import annotations

import threading
from typing import cast

import pytest

from harness.drivers import redelivery
from harness.drivers.lease import lease_began
from harness.drivers.redelivery import (
    CONSUME_AFTER_S,
    CONSUME_POLLS,
    RELEASE_WITHIN_LEASES,
    _Enqueue,
    _Window,
    consume_within_s,
)
from harness.history import Event
from harness.rendezvous import Hit
from harness.trial import Trial

LEASE_S = 0.6


def ev(t: float, kind: str, job: str | None = "j-0001", source: str = "worker:w1") -> Event:
    return Event(t, source, kind, job)


def test_a_reported_claim_is_where_the_lease_began() -> None:
    events = [
        ev(0.0, "enqueue", source="supervisor"),
        ev(0.9, "claim"),  # an earlier attempt's
        ev(1.2, "claim"),  # the held attempt's
        ev(1.3, "failpoint"),
        ev(2.0, "claim", source="worker:w2"),  # after the hold: not the held attempt's
    ]
    assert lease_began(events, "j-0001", held_at=1.7) == 1.2


def test_without_claims_the_first_failpoint_for_the_job_counts() -> None:
    events = [
        ev(0.0, "enqueue", source="supervisor"),
        ev(1.0, "failpoint", job="j-0002"),  # another job's
        ev(1.6, "failpoint"),  # after_claim
        ev(1.7, "failpoint"),  # before_external_call
        ev(2.3, "failpoint", source="worker:w2"),  # the redelivery's, after the hold
    ]
    assert lease_began(events, "j-0001", held_at=1.75) == 1.6


def test_without_failpoints_the_first_enqueue_counts_and_else_the_hold() -> None:
    enqueues = [ev(0.2, "enqueue", source="supervisor"), ev(0.5, "enqueue", job="j-0002")]
    assert lease_began(enqueues, "j-0001", held_at=3.0) == 0.2
    assert lease_began([], "j-0001", held_at=3.0) == 3.0


def test_the_failing_history_is_released_before_the_takeover() -> None:
    # The pyqueue history that duplicated at a plain provider (times from its start): the
    # first worker claimed at 1.636, its request was held from 1.735, and a peer took
    # the job when the lease ran out, at 2.303. Counted from the hold, the release was
    # due at 2.035 at best; from the claim it is due well before the takeover.
    events = [
        ev(0.0, "enqueue", source="supervisor"),
        ev(1.636, "failpoint"),
        ev(1.675, "failpoint"),
        ev(1.703, "arrival", source="provider:mailer"),
    ]
    began = lease_began(events, "j-0001", held_at=1.735)
    assert began + LEASE_S * RELEASE_WITHIN_LEASES == pytest.approx(1.936)
    assert began + LEASE_S < 2.303  # the lease it is counted against ended before it


class _SlowTarget:
    """A trial whose enqueue command has not exited until told to."""

    def __init__(self, error: Exception | None = None, *, refuses: bool = False) -> None:
        self.go = threading.Event()
        self.error = error
        self.refuses = refuses
        self.enqueued: list[str] = []

    def deliver(self, job_id: str) -> bool:
        self.go.wait()
        if self.error is not None:
            raise self.error
        self.enqueued.append(job_id)
        return self.refuses


def _trial(target: _SlowTarget) -> Trial:
    return target  # type: ignore[return-value]  # only .deliver is used


def test_a_redelivery_runs_beside_the_hold_and_its_error_is_kept() -> None:
    ok = _SlowTarget()
    redelivery = _Enqueue(_trial(ok), "j-0001")
    assert redelivery.running()  # the driver is free to release on time meanwhile
    ok.go.set()
    redelivery.join()
    redelivery.check()
    assert ok.enqueued == ["j-0001"]
    assert not redelivery.refused

    refusing = _SlowTarget(refuses=True)
    redelivery = _Enqueue(_trial(refusing), "j-0001")
    refusing.go.set()
    redelivery.join()
    assert redelivery.refused  # its own answer, whatever another delivery's was

    failing = _SlowTarget(RuntimeError("enqueue exited 2"))
    redelivery = _Enqueue(_trial(failing), "j-0001")
    failing.go.set()
    redelivery.join()
    with pytest.raises(RuntimeError, match="exited 2"):
        redelivery.check()


def hit(t: float, point: str, source: str, job: str = "j-0001") -> Hit:
    return Hit(point, job, None, None, t, False, None, source=source)  # type: ignore[arg-type]


def test_after_the_release_the_first_worker_takes_up_the_redelivery_only_by_a_claim() -> None:
    window = _Window("j-0001", busy="worker:w1", opened=1.5, released=1.75)
    lanes = {"worker:w1", "worker:w2"}
    assert not window.takes_up(hit(1.4, "after_claim", "worker:w2"), lanes)  # before it
    assert window.takes_up(hit(1.6, "before_reconcile", "worker:w1"), lanes)  # while held
    assert window.takes_up(hit(1.8, "before_reconcile", "worker:w2"), lanes)
    # The first worker's own attempt goes on after the release: not a take-up ...
    assert not window.takes_up(hit(1.78, "after_external_call", "worker:w1"), lanes)
    assert not window.takes_up(hit(1.79, "after_local_write", "worker:w1"), lanes)
    # ... but a claim of the job is a new one: the redelivery, once its enqueue ended.
    assert window.takes_up(hit(1.86, "after_claim", "worker:w1"), lanes)
    assert not window.takes_up(hit(1.86, "after_claim", "worker:w1", job="j-0002"), lanes)
    assert not window.takes_up(hit(1.86, "after_claim", "enqueue"), lanes)


def test_a_claim_before_the_hold_is_the_first_attempts_own_and_another_worker_takes_up() -> None:
    # A later round: the redelivery's command started before the claim, so the window
    # opens at the claim (1.0) and the first worker's request is held from 1.1.
    window = _Window("j-0003", busy="worker:w1", opened=1.0, released=1.3, held=1.1)
    lanes = {"worker:w1", "worker:w2"}
    assert not window.takes_up(hit(0.9, "after_claim", "worker:w2", job="j-0003"), lanes)
    assert not window.takes_up(hit(1.05, "before_external_call", "worker:w1", job="j-0003"), lanes)
    assert window.takes_up(hit(1.05, "after_claim", "worker:w2", job="j-0003"), lanes)
    assert window.takes_up(hit(1.2, "before_reconcile", "worker:w1", job="j-0003"), lanes)
    assert not window.takes_up(hit(1.4, "after_local_write", "worker:w1", job="j-0003"), lanes)


def test_a_redelivery_is_waited_for_by_the_targets_declared_poll() -> None:
    # Undeclared: the harness's own floor. Declared: two of the worker's own polls more.
    assert consume_within_s(None) == CONSUME_AFTER_S
    assert consume_within_s(4.5) == CONSUME_AFTER_S + CONSUME_POLLS * 4.5


class _SlowReads:
    """A trial on a fake clock whose reads of the providers' writes take ``read_s``."""

    def __init__(self, read_s: float, *, second_write_at: float = float("inf")) -> None:
        self.now = 100.0
        self.read_s = read_s
        self.second_write_at = second_write_at
        self.reads = 0

    def monotonic(self) -> float:
        return self.now

    def writes(self, job: str) -> list[str]:
        self.reads += 1
        self.now += self.read_s
        return ["w1", "w2"] if self.now >= self.second_write_at else ["w1"]

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_slow_read_of_the_writes_never_keeps_the_request_past_its_deadline() -> None:
    slow = _SlowReads(read_s=0.3)
    trial = cast(Trial, slow)
    redelivery._hold_until(trial, "j-0001", release_by=100.5, clock=slow.monotonic)
    # One read told how long a read takes; the rest of the hold is waited out.
    assert slow.now == pytest.approx(100.5)
    assert slow.reads == 1


def test_a_second_write_ends_the_hold_early() -> None:
    quick = _SlowReads(read_s=0.001, second_write_at=100.1)
    redelivery._hold_until(cast(Trial, quick), "j-0001", release_by=100.5, clock=quick.monotonic)
    assert 100.1 <= quick.now < 100.2
