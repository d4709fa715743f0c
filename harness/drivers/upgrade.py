"""``upgrade_during_recovery``: the worker is killed with its effect's outcome unknown,
and the workers that recover the job run the target's next release (issue 34, a DBOS
report: a new release recovering the old release's workflows under its own code).

The first worker is SIGKILLed at ``after_external_call``: the provider took the write,
the worker's ledger has not recorded it. The next worker starts from the target's
``upgraded_command`` (the reference: its version 2, which names its keys differently).
The new code must reconcile the old attempt (by the key or marker the old code sent)
before any write of its own; judged as ``crash_after_external_success`` is, with
``no_duplicate_effect`` first.
"""

from __future__ import annotations

from harness.drivers.review import NONE, review_if_unqueryable
from harness.trial import Trial

#: Where the old release dies: its call made, its outcome unknown to its ledger.
POINT = "after_external_call"
#: Why the row does not apply to a target that declares no next release.
NO_UPGRADE = (
    "upgrade_during_recovery starts the recovering workers from the target's next "
    "release; the target declares none (declare [target] upgraded_command)"
)


def upgrade_during_recovery(trial: Trial) -> frozenset[str]:
    """Kill the old release at ``after_external_call``; the upgraded one recovers."""
    job = trial.enqueue_batch()
    gate = trial.hold(POINT, job=job, or_next=True)
    old = trial.start_worker()
    hit = trial.wait_hit(gate, what=f"failpoint {POINT} for {job}")
    job = hit.job or job
    died_there = trial.crash(old, trial.cell.signal or "SIGKILL", hit=hit)
    new = trial.start_worker(upgraded=True)
    trial.history.append(
        "supervisor",
        "note",
        worker=new.name,
        job=job,
        text=f"{new.name} runs the upgraded command; {old.name} ran the old one",
    )
    return review_if_unqueryable(trial, job) if died_there else NONE
