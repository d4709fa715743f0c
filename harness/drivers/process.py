"""Worker faults: a kill or a stop at a failpoint, or while the provider holds its call."""

from __future__ import annotations

import time
from collections.abc import Callable

from fake_providers import Fault
from harness.backends.base import WorkerHandle
from harness.contract.errors import Inconclusive
from harness.drivers.review import NONE, review_if_unqueryable
from harness.trial import Trial

#: How long a thawed owner gets to show what it decided (a bound, not a pause).
DECIDE_WITHIN_S = 10.0


def crash_at_failpoint(trial: Trial) -> frozenset[str]:
    """Kill the worker exactly at a failpoint, then let a fresh worker recover."""
    job = trial.enqueue_batch()
    gate = trial.hold(trial.cell.point, job=job, or_next=True)
    w1 = trial.start_worker()
    hit = trial.wait_hit(gate, what=f"failpoint {trial.cell.point} for {job}")
    died_there = trial.crash(w1, trial.cell.signal or "SIGKILL", hit=hit)
    trial.start_worker()
    if trial.cell.point == "before_external_call" or not died_there:
        return NONE
    return review_if_unqueryable(trial, hit.job or job)


def crash_during_call(trial: Trial) -> frozenset[str]:
    """Kill the worker while the provider holds its request, before or after commit.

    Fairness: the held request is released (dropped before commit, answered after it)
    before the dead worker's lease can expire, so recovery never races a ghost request.
    """
    job = trial.enqueue_batch()
    before = trial.cell.point == "provider_hold_before_commit"
    fault_id = trial.arm(Fault("hold_before_commit" if before else "hold_after_commit", job=job))
    w1 = trial.start_worker()
    trial.wait_held(fault_id, what=f"provider hold for {job}")
    trial.crash(w1, trial.cell.signal or "SIGKILL")
    trial.release(fault_id, "drop" if before else "respond")
    trial.start_worker()
    return review_if_unqueryable(trial, job)


def lease_expiry_slow_worker(trial: Trial) -> frozenset[str]:
    """SIGSTOP the owner at a boundary past its lease; another finishes; SIGCONT."""
    job = trial.enqueue_batch()
    gate = trial.hold(trial.cell.point, job=job, or_next=True)
    w1 = trial.start_worker()
    hit = trial.wait_hit(gate, what=f"failpoint {trial.cell.point} for {job}")
    trial.send(w1, "SIGSTOP")
    trial.stop_clear_of_write_locks(w1)
    # Let the frozen worker go at the boundary: it reads the answer only when thawed.
    hit.resume()
    return take_over_then_thaw(trial, w1, hit.job or job)


def take_over_then_thaw(
    trial: Trial,
    owner: WorkerHandle,
    job: str,
    *,
    decided: Callable[[float], bool] | None = None,
) -> frozenset[str]:
    """With ``owner`` stopped inside ``job``'s attempt: wait past its lease, let another
    worker finish every job, then SIGCONT the owner and give it the time to act late.

    ``decided(t_thawed)`` tells when the thawed owner has made its choice (a late call,
    or giving the lease up): a machine under load may take longer than the pause below
    to wake it, and a verdict read before it chose would prove nothing.
    """
    # Until the stopped owner's lease has surely run out: its expiry in the ledger where
    # the target tells it, else 1.5 of its own leases.
    trial.wait_lease_out(job, leases=1.5)
    trial.start_worker()
    if not trial.wait_quiescent():
        raise Inconclusive("the second worker did not finish while the owner was stopped")
    thawed = time.monotonic()
    trial.send(owner, "SIGCONT")
    if decided is not None:
        deadline = thawed + DECIDE_WITHIN_S
        while not decided(thawed):
            if time.monotonic() > deadline:
                raise Inconclusive(
                    f"{owner.name} showed no decision within {DECIDE_WITHIN_S:g} s of SIGCONT"
                )
            trial.sleep(0.02)
    # The thawed owner acts now (a late call or a late result write) or never: until its
    # attempt is seen to end, at most max(settle, one lease of its own).
    trial.wait_attempts_over(max(trial.config.settle_s, trial.config.lease_ttl_s))
    return NONE
