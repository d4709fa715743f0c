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
held write may land (after commit it has): it started before the cancel. A worker whose
client gave up on the held write and wrote again before the cancel was acknowledged
leaves the cell inconclusive: its retry came before the cancel, and proves nothing.
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
    early = trial.writes(job)[1:]
    trial.release(fault_id, "drop")
    if early:
        # Its client gave up on the held write and it wrote again before the cancel: what
        # follows the cancel is no retry of the write in flight, and proves nothing.
        raise Inconclusive(
            f"a second write of {job} reached the provider before the cancel was "
            "acknowledged (its client gave up on the held write): the cancel came too late"
        )
    return NONE
