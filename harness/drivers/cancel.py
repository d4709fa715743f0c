"""``cancel_in_flight``: a job is cancelled while its write is in flight, then the
write is dropped and the worker's retries go on (issue 34, a Temporal report: an
activity cancelled while in flight, and both the original and its retry landed).

The provider holds the job's first write, before or after committing it. While it is
held the job is cancelled through the target (its ``cancel`` command; the reference:
a cancel request in its ledger), and the moment the target acknowledged it is recorded
(a ``cancel`` event). Then the held write is dropped: the worker learns nothing of its
outcome, and whatever it does next (reconcile, retry) happens after the cancel.

Judged by ``no_effect_after_cancel`` from the providers' ground truth: a write that
reached a provider after the acknowledgement and made an effect is a violation. The
held write may land (after commit it has): it started before the cancel. The workers
are stopped (SIGSTOP) from the hold until the write is dropped, so the cancel's own
start-up never races the worker's HTTP timeout. A worker whose client gave up on the
held write and wrote again before they were stopped leaves the cell inconclusive: its
retry came before the cancel, and proves nothing.
"""

from __future__ import annotations

import time

from fake_providers import Fault
from harness.contract.errors import Inconclusive
from harness.drivers.review import NONE
from harness.trial import Trial

#: Why the row does not apply to a target that declares no way to cancel a job.
NO_CANCEL = (
    "cancel_in_flight cancels a job while its write is held; the target declares no "
    "way to cancel one (declare [target] cancel)"
)


def cancel_in_flight(trial: Trial) -> frozenset[str]:
    """Hold the job's write, cancel the job, drop the write; retries go on."""
    assert trial.target is not None
    job = trial.enqueue_batch()
    before = trial.cell.point == "cancel_before_commit"
    fault_id = trial.arm(Fault("hold_before_commit" if before else "hold_after_commit", job=job))
    trial.start_worker()
    trial.wait_held(fault_id, what=f"provider hold for {job}")
    # The workers stand still while the target cancels: a cancel command that starts
    # slowly (a framework to import, a loaded machine) must not outrun the worker's own
    # HTTP timeout, or its retry lands before the cancel and the cell proves nothing.
    frozen = [w for w in trial.workers.values() if w.alive()]
    for worker in frozen:
        trial.send(worker, "SIGSTOP")
        trial.stop_clear_of_write_locks(worker)
    try:
        _cancel(trial, job)
        # Writes at the cell's provider only: a job that calls billing before mailer has
        # its billing write too, which is no retry of the one held here.
        early = [w for w in trial.writes(job) if w.fields.get("provider") == trial.provider_name][
            1:
        ]
        trial.release(fault_id, "drop")
    finally:
        for worker in frozen:
            if worker.alive():
                trial.send(worker, "SIGCONT")
    if early:
        # Its client gave up on the held write and it wrote again before the cancel: what
        # follows the cancel is no retry of the write in flight, and proves nothing.
        raise Inconclusive(
            f"a second write of {job} reached the provider before the cancel was "
            "acknowledged (its client gave up on the held write): the cancel came too late"
        )
    return NONE


def _cancel(trial: Trial, job: str) -> None:
    """Cancel ``job`` through the target and record the moment it acknowledged."""
    assert trial.target is not None
    asked = time.monotonic()
    if not trial.target.cancel(job):
        raise Inconclusive("the target declares no way to cancel a job")
    trial.history.append(
        "supervisor",
        "cancel",
        job=job,
        asked_s=round(time.monotonic() - asked, 4),
        text=f"{job} cancelled while its write was held; the target acknowledged it",
    )
