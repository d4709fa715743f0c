"""Delivery faults: the same job reaching two consumers, or triggered twice at once."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from fake_providers import Fault
from harness.contract.errors import Inconclusive
from harness.drivers.lease import lease_began
from harness.drivers.review import NONE
from harness.rendezvous import Hit
from harness.target import TargetAdapter
from harness.trial import Trial

#: The held first attempt is released by this share of the lease after that attempt took
#: its lease (:func:`harness.drivers.lease.lease_began`), so the first worker still owns
#: its job (DESIGN "Fairness": no recovery races a ghost).
RELEASE_WITHIN_LEASES = 0.5
#: How long after the release a redelivery may still be taken up by a worker.
CONSUME_AFTER_S = 3.0
#: The standard failpoint of a job just claimed (docs/failpoints.md).
CLAIMED = "after_claim"


def duplicate_delivery(trial: Trial) -> frozenset[str]:
    """Deliver the job again while its first attempt's request is in flight.

    How a job reaches a target twice is the target's: a second consumer with a ledger of
    its own (the reference), or the same job enqueued again into the same target (any
    queue's at-least-once redelivery).
    """
    assert trial.target is not None
    if trial.target.redelivery == "second_consumer":
        return _to_a_second_consumer(trial)
    return _enqueued_again(trial)


def _to_a_second_consumer(trial: Trial) -> frozenset[str]:
    """The first delivery's request is held at the provider; the second consumer (a ledger
    of its own, as when one message reaches two subscribers) sends its own request for
    the same job. Only the provider's idempotency can keep the effect single, and the
    second consumer must not read "in flight" as "failed".
    """
    job = trial.enqueue_batch()
    fault_id = trial.arm(Fault("hold_before_commit", job=job))
    trial.start_worker()
    trial.wait_held(fault_id, what=f"first delivery's request for {job}")
    trial.reached = False  # reached once the duplicate meets the held request
    other = trial.add_consumer(job)
    trial.start_worker(consumer=other)
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and not trial.reached:
        trial.reached = len(trial.writes(job)) >= 2
        trial.sleep(0.02)
    if not trial.reached:
        raise Inconclusive(f"the second delivery of {job} never reached the provider")
    trial.release(fault_id, "commit")
    return NONE


def _enqueued_again(trial: Trial) -> frozenset[str]:
    """The same job (id and payload) enqueued again while the first attempt's request is
    held at the provider, with a second worker free to take it.

    The cell is reached when the second delivery was consumed: the enqueue command
    exited 0 and, for a worker that speaks failpoints, a worker reached a failpoint for
    the job after it, or a second write for it reached the provider. Whether that worker
    sends is its business: one that waits for the first attempt instead is right to.
    Fairness: the held request is released before the first worker's lease can expire,
    whatever the second worker did, so the first attempt stays the first worker's. The
    lease is counted from when that attempt took it, not from the hold, and the enqueue
    command runs beside the hold: a slow command must not keep the request frozen past
    the lease.
    """
    assert trial.rendezvous is not None
    job = trial.enqueue_batch()
    fault_id = trial.arm(Fault("hold_before_commit", job=job))
    trial.start_worker()
    trial.start_worker()  # free (or done with the other jobs) when the redelivery comes
    held = trial.wait_held(fault_id, what=f"first delivery's request for {job}")
    before = [h for h in trial.rendezvous.hits() if h.job == job]
    # The worker whose request is held goes on with its attempt after the release: its
    # later failpoints are that attempt's, not the redelivery's.
    first = _Window(job, busy=before[-1].source if before else None)
    trial.reached, trial.reached_by = False, None
    first.opened = time.monotonic()
    redelivery = _Enqueue(trial, job)  # first: the lease is already running
    try:
        trial.observer.drain()  # the claims a target's ledger reports
        began = lease_began(trial.history.events(), job, held.t_mono)
        release_by = began + trial.config.lease_ttl_s * RELEASE_WITHIN_LEASES
        while time.monotonic() < release_by and len(trial.writes(job)) < 2:
            trial.sleep(0.02)
        first.released = time.monotonic()
        trial.release(fault_id, "commit")
        if redelivery.running():
            trial.history.append(
                "supervisor",
                "note",
                job=job,
                text=f"the held request for {job} was released while the redelivery's "
                "enqueue command still ran: the first attempt's lease allowed no longer",
            )
    finally:
        redelivery.join()  # no enqueue outlives its trial
    redelivery.check()  # a failing enqueue is the configuration's error, not a verdict
    deadline = time.monotonic() + CONSUME_AFTER_S
    consumed, how = _consumed(trial, first, speaks=bool(before))
    while not consumed:
        if time.monotonic() >= deadline:
            raise Inconclusive(
                f"the second delivery of {job} was enqueued (the enqueue command exited 0), "
                f"but no worker reached a failpoint for {job} after it and no second write "
                f"reached the provider within {CONSUME_AFTER_S:.0f} s of the release: a "
                "target whose enqueue drops a job it already holds cannot be redelivered to"
            )
        trial.sleep(0.02)
        consumed, how = _consumed(trial, first, speaks=bool(before))
    trial.reached, trial.reached_by = True, how
    return NONE


class _Enqueue:
    """``trial.enqueue(job)`` in a thread of its own, its error kept for :meth:`check`."""

    def __init__(self, trial: Trial, job: str) -> None:
        self._error: BaseException | None = None

        def run() -> None:
            try:
                trial.enqueue(job)
            except BaseException as exc:  # raised again by check, in the driver's thread
                self._error = exc

        self._thread = threading.Thread(target=run, name=f"enqueue {job}", daemon=True)
        self._thread.start()

    def running(self) -> bool:
        return self._thread.is_alive()

    def join(self) -> None:
        # The enqueue command bounds itself (targets/command.py ENQUEUE_TIMEOUT_S).
        self._thread.join()

    def check(self) -> None:
        if self._error is not None:
            raise self._error


@dataclass
class _Window:
    """When the redelivery of ``job`` was made and the held request let go, and the lane
    of the worker whose request was held."""

    job: str
    busy: str | None
    opened: float = 0.0
    released: float = float("inf")

    def takes_up(self, hit: Hit, lanes: set[str]) -> bool:
        """``hit`` is a worker taking up the redelivery: any worker's, for the job, while
        the first attempt was frozen at the provider; after that, another worker's, or a
        claim by the first worker (its attempt is past its claim, so a claim is a new
        take-up: when the enqueue command outlasts the hold, the first worker may well
        be the one free to take the redelivery)."""
        if hit.job != self.job or hit.source not in lanes or hit.t <= self.opened:
            return False
        return hit.t < self.released or hit.source != self.busy or hit.point == CLAIMED


def _consumed(trial: Trial, window: _Window, *, speaks: bool) -> tuple[bool, str | None]:
    """Whether the redelivery is known to be consumed, and how: at a failpoint, at the
    provider (a second write), or (None) by the enqueue alone, which is all a worker
    without failpoints can show."""
    assert trial.rendezvous is not None
    lanes = {f"worker:{name}" for name in trial.workers}
    if any(window.takes_up(h, lanes) for h in trial.rendezvous.hits()):
        return True, "failpoint"
    if len(trial.writes(window.job)) >= 2:
        return True, "provider"
    return not speaks, None


def simultaneous_trigger(trial: Trial) -> frozenset[str]:
    """Trigger the same payload twice at the same moment, with two workers waiting.

    Each trigger has its own connection to the target, as two webhook deliveries would.
    """
    assert trial.target is not None
    trial.start_worker()
    trial.start_worker()
    job = "j-0001"
    start = threading.Barrier(2)
    errors: list[BaseException] = []
    twin = trial.target.twin()

    def trigger(target: TargetAdapter) -> None:
        try:
            start.wait(timeout=5)
            trial.enqueue(job, target=target)
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=trigger, args=(t,)) for t in (trial.target, twin)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    if twin is not trial.target:
        twin.close()
    if errors:
        raise Inconclusive(f"triggering {job} twice failed: {errors[0]!r}")
    trial.reached = True
    return NONE
