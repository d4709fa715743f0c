"""Identity lost on recovery: the job's login expired, or its profile now holds another
account, while its worker was down.

Every job of the trial is bound to an identity of its own (``body.identity``). The
first worker is killed at ``before_external_call`` (the key is persisted, nothing was
sent); the provider is told that the job's identity is no longer good; a fresh worker
recovers the job. It must find that out before acting (its reconcile lookup, or its
write, is refused with 401 or 403) and stop: needs_review, blocked. Trying once more, as
whoever the profile holds now or under the expired login, is what ``identity_bound``
catches.
"""

from __future__ import annotations

from harness.contract.errors import Inconclusive
from harness.drivers.review import NONE
from harness.trial import Trial

#: Whom a changed profile holds now: an account no job is bound to.
OTHER_ACCOUNT = "acct-someone-else"


def identity_lost_on_recovery(trial: Trial) -> frozenset[str]:
    trial.bind_identities = True
    job = trial.enqueue_batch()
    gate = trial.hold("before_external_call", job=job)
    w1 = trial.start_worker()
    hit = trial.wait_hit(gate, what=f"failpoint before_external_call for {job}")
    trial.crash(w1, trial.cell.signal or "SIGKILL", hit=hit)
    identity = trial.job_body(job)["identity"]
    if trial.cell.point == "session_expired":
        trial.client.set_identity(identity, "expired")
        text = f"the session of {identity} expired while {w1.name} was down"
    else:
        trial.client.set_identity(identity, "changed", now_acts_as=OTHER_ACCOUNT)
        text = f"the profile of {identity} now holds {OTHER_ACCOUNT}"
    trial.history.append("supervisor", "note", job=job, identity=identity, text=text)
    trial.start_worker()
    if not trial.wait_quiescent():
        raise Inconclusive(f"{job} did not come to an end after its identity was lost")
    # Blocked is the only safe end where the worker names the identity it acts under;
    # one that names none cannot be refused, and the invariant is left unjudged.
    sent_identity = any(e.fields.get("identity") for e in trial.writes(job))
    sent_identity = sent_identity or any(
        e.fields.get("identity") for e in trial.history.of_kind("reconcile") if e.job == job
    )
    return frozenset({job}) if sent_identity else NONE
