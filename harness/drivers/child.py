"""``child_killed``: the one process of a pool that is inside the failpoint is SIGKILLed,
not the worker's tree (issue 34: a prefork pool's child taken by the OOM killer while
its parent goes on, and acknowledges anyway).

The failpoint line names the pid of the process that reached the boundary; in a pool
that is the child running the attempt, not the worker the harness started. Only that
pid is killed; the parent lives on, and what it does next (leave the job to be claimed
again, or acknowledge it) is recorded and judged: ``nothing_lost`` holds an
acknowledged job to having its effect.
"""

from __future__ import annotations

import os
import signal

from harness.contract.errors import Inconclusive
from harness.drivers.review import NONE
from harness.trial import Trial

#: Where the child is killed: after it took the job, before any call (nothing happened,
#: so the only safe end is a retry).
POINT = "before_external_call"
#: What a target is told in this row, so the reference worker runs as a pool.
POOL_ENV = {"CRASHPOINT_POOL": "1"}
#: Why the row does not apply to a target that declares no pool.
NO_POOL = (
    "child_killed kills the one child of a pool inside the failpoint; the target "
    "declares no pool (declare [target] pool = true when its worker forks children "
    "that run the jobs)"
)


def child_killed(trial: Trial) -> frozenset[str]:
    """SIGKILL the process inside ``before_external_call``, which must be a child of the
    worker; the parent goes on."""
    job = trial.enqueue_batch()
    gate = trial.hold(POINT, job=job)
    parent = trial.start_worker(extra_env=POOL_ENV)
    hit = trial.wait_hit(gate, what=f"failpoint {POINT} for {job}")
    child = hit.peer_pid or hit.pid
    if child is None or child == parent.pid:
        hit.resume()
        raise Inconclusive(
            f"the process inside {POINT} is the worker itself (pid {parent.pid}), not a "
            "child of it: the target runs no pool here"
        )
    trial.history.append(
        "supervisor",
        "signal",
        worker=parent.name,
        pid=child,
        signal="SIGKILL",
        text=f"SIGKILL to {parent.name}'s child {child} only; {parent.name} goes on",
    )
    os.kill(child, signal.SIGKILL)
    if not parent.alive():
        raise Inconclusive(f"{parent.name} died with its child; the row needs it alive")
    return NONE
