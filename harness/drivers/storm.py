"""``redelivery_storm``: a job longer than its visibility window is delivered again each
window, so three copies of one attempt are alive at once (issue 34: Celery's long tasks
and ETA tasks on Redis or SQS, Dramatiq's redelivery after its timeout).

The first copy is stopped at ``before_external_call`` past its lease; a second worker
takes the job, reaches the same boundary and is stopped past its lease too; a third
takes it and is held at that boundary, alive, still owning the job. Then both stale
copies wake while the third is in flight, which is where a worker that asks "is the job
done?" instead of "do I still own it?" calls out: the two-copy row
(``lease_expiry_slow_worker``) wakes its stale copy only after the job is done, and
such a worker passes it. Once both stale copies have shown what they decided, the third
goes on. Every copy's writes are judged (``no_duplicate_effect`` counts all effects,
``fenced_writes`` every call under a stale token).

Fairness: the third copy owns the job throughout (it renews; the harness only holds it
at a boundary, within its lease's reach as every failpoint hold is), so a correct worker
has one safe path: the stale copies find their leases gone and stop.
"""

from __future__ import annotations

import time

from harness.attempts import open_attempts
from harness.backends.base import WorkerHandle
from harness.drivers.review import NONE
from harness.rendezvous import Hit
from harness.trial import Trial

#: The boundary each copy is caught at: the last before its call.
POINT = "before_external_call"
#: Copies of the attempt alive at once: the first and the two redeliveries.
COPIES = 3
#: How long past a stopped copy's lease the next is awaited, in leases, for a target
#: whose ledger does not say when the lease ends (the margin is for its own clock).
LEASES_PAST = 1.5


def redelivery_storm(trial: Trial) -> frozenset[str]:
    """Three copies of one attempt: two stopped past their leases, one held in flight;
    the two stale ones wake while the third still owns the job."""
    job = trial.enqueue_batch()
    stale: list[WorkerHandle] = []
    for copy in range(1, COPIES):
        worker, hit = _next_copy(trial, job, copy)
        trial.send(worker, "SIGSTOP")
        trial.stop_clear_of_write_locks(worker)
        # Let it go at the boundary: a stopped worker reads the answer only when thawed.
        hit.resume()
        stale.append(worker)
        _wait_window_out(trial, job)
    _, third = _next_copy(trial, job, COPIES)
    for worker in stale:
        trial.send(worker, "SIGCONT")
    _wait_decided(trial, stale)
    third.resume()
    return NONE


def _next_copy(trial: Trial, job: str, copy: int) -> tuple[WorkerHandle, Hit]:
    gate = trial.hold(POINT, job=job)
    worker = trial.start_worker()
    hit = trial.wait_hit(gate, what=f"copy {copy} of {job} at failpoint {POINT}")
    return worker, hit


def _wait_window_out(trial: Trial, job: str) -> None:
    """Until the stopped copy's lease (its visibility window) has surely run out."""
    assert trial.target is not None
    window = trial.target.visibility_s
    if window is None:
        trial.wait_lease_out(job, leases=LEASES_PAST)
    else:
        trial.sleep(window * LEASES_PAST)


def _wait_decided(trial: Trial, stale: list[WorkerHandle]) -> None:
    """Until the thawed copies' attempts are seen to end (a late call, or the lease
    given up), at most ``max(settle, one lease)``: the whole bound where the history
    cannot show it, as for the two-copy row's thawed owner."""
    bound = max(trial.config.settle_s, trial.config.lease_ttl_s)
    deadline = time.monotonic() + bound
    names = [w.name for w in stale]
    while time.monotonic() < deadline:
        trial.observer.drain()
        events = trial.history.events()
        if any(e.kind == "claim" for e in events) and not open_attempts(events, names):
            return
        trial.sleep(0.02)
