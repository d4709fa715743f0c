"""State-store faults: the target's state restored from a snapshot taken before the job ran.

The reference target snapshots its ledger's tables; a command target its worker's whole
state directory. Both are taken and put back while no worker runs.
"""

from __future__ import annotations

from harness.contract.errors import Inconclusive
from harness.drivers.review import review_if_unqueryable
from harness.trial import Trial


def state_store_restore(trial: Trial) -> frozenset[str]:
    """Finish the job, restore the state from before it ran, restart in recovery."""
    assert trial.target is not None
    job = trial.enqueue_batch()
    snapshot = trial.target.snapshot()
    w1 = trial.start_worker()
    if not trial.wait_quiescent():
        raise Inconclusive("the job did not finish before the restore")
    trial.reached = True
    trial.crash(w1, trial.cell.signal or "SIGKILL")
    trial.target.restore(snapshot)
    trial.history.append("supervisor", "restore", note="state restored from before the job ran")
    trial.start_worker(recovery=True)
    return review_if_unqueryable(trial, job)
