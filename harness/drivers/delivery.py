"""Delivery faults: the same job reaching two consumers, or triggered twice at once."""

from __future__ import annotations

import threading
import time

from fake_providers import Fault
from harness.contract.errors import Inconclusive
from harness.drivers.redelivery import enqueued_again
from harness.drivers.review import NONE
from harness.targets.base import TargetAdapter
from harness.trial import Trial


def duplicate_delivery(trial: Trial) -> frozenset[str]:
    """Deliver the job again while its first attempt's request is in flight.

    How a job reaches a target twice is the target's: a second consumer with a ledger of
    its own (the reference), or the same job enqueued again into the same target (any
    queue's at-least-once redelivery).
    """
    assert trial.target is not None
    if trial.target.redelivery == "second_consumer":
        return _to_a_second_consumer(trial)
    return enqueued_again(trial)


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
    # As long as any worker gets to reach its first boundary: this one starts now.
    deadline = time.monotonic() + trial.reach_s
    while time.monotonic() < deadline and not trial.reached:
        trial.reached = len(trial.writes(job)) >= 2 and _second_write_answered(trial, job)
        if not trial.reached:
            trial.sleep(0.02)
    if not trial.reached:
        raise Inconclusive(
            f"the second delivery of {job} never reached the provider, or was never "
            f"answered, within {trial.reach_s:g} s of its consumer's start"
        )
    trial.release(fault_id, "commit")
    return NONE


def _second_write_answered(trial: Trial, job: str) -> bool:
    """True once the provider answered the second write for ``job``.

    A write is recorded as it arrives, before the provider reads its key: released at
    that moment, the held first attempt could commit before the second is decided, which
    then replays the first's answer instead of meeting it in flight, and the cell would
    never show what a worker does with "in flight" (a 409)."""
    writes = [a for a in trial.client.arrivals() if a.kind == "write" and a.job_id == job]
    return len(writes) >= 2 and writes[1].status is not None


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
