"""Multi-step jobs and jobs that come again after they completed.

A multi-step cell's point is ``boundary@step``: the worker is killed at that boundary of
that step (the failpoint line names its step), and a fresh worker must resume at the
first step that did not take effect. A completed job comes again when its queue's
acknowledgement was lost, and (key retention) only after the provider forgot its key.
"""

from __future__ import annotations

import time

from harness.contract.errors import Inconclusive
from harness.drivers.delivery_words import not_taken_up, refused, unseen
from harness.drivers.review import NONE
from harness.trial import Trial
from scenarios.table import split_point

#: How long a redelivery is watched for a worker taking it up (at least two leases, and
#: two of the target's declared polls more: one it may sleep through, and one more).
TAKE_UP_S = 1.0
TAKE_UP_POLLS = 2


def crash_at_step(trial: Trial) -> frozenset[str]:
    """Kill the worker at one boundary of one step, then let a fresh worker recover."""
    boundary, step = split_point(trial.cell.point)
    job = trial.enqueue_batch()
    gate = trial.hold(boundary, job=job, step=step, or_next=True)
    w1 = trial.start_worker()
    hit = trial.wait_hit(gate, what=f"failpoint {boundary} of step {step} for {job}")
    job = hit.job or job
    died_there = trial.crash(w1, trial.cell.signal or "SIGKILL", hit=hit)
    trial.start_worker()
    if boundary != "after_external_call" or not died_there:
        return NONE
    # The step's call may have taken effect and cannot be looked up: only review is safe.
    provider = dict(trial.steps).get(step or "", trial.provider_name)
    if trial.providers[provider].kind == "unqueryable":
        return frozenset({job})
    return NONE


def lost_acknowledgement(trial: Trial) -> frozenset[str]:
    """The job completes; its acknowledgement is lost, so it is delivered again."""
    return _complete_then_redeliver(trial)


def key_retention(trial: Trial) -> frozenset[str]:
    """The job completes and comes again only after the provider forgot its key."""
    ttl = trial.cell.scenario.key_ttl_s
    if ttl is None:
        raise Inconclusive(f"{trial.cell.scenario.name} sets no key_ttl_s for its provider")
    return _complete_then_redeliver(trial, key_ttl_s=ttl)


def _complete_then_redeliver(trial: Trial, *, key_ttl_s: float | None = None) -> frozenset[str]:
    """``key_ttl_s``: once the job completed, the idempotent providers keep keys only that
    long, and the job comes again after 1.5 of it. Set no sooner: a correct worker whose
    write got no answer in its own time-out looks it up by its key, and on a loaded
    machine that came 0.3 s after the commit; a key forgotten by then is a second effect
    no worker could prevent, not the expiry this cell is about."""
    assert trial.rendezvous is not None
    job = trial.enqueue_batch()
    trial.start_worker()
    if not trial.wait_quiescent():
        raise Inconclusive(f"{job} did not complete before it was to be delivered again")
    if key_ttl_s is not None:
        for name, provider in trial.providers.items():
            if provider.kind == "idempotent":
                provider.client.configure(key_ttl_s=key_ttl_s)
                trial.history.append(f"provider:{name}", "note", key_ttl_s=key_ttl_s)
        trial.sleep(key_ttl_s * 1.5)
    t = time.monotonic()
    if not trial.redeliver(job):
        raise Inconclusive(f"{job} was not acknowledged, so no acknowledgement could be lost")
    if trial.refused(job, since=t):
        trial.reached, trial.reached_by, trial.exercised = True, None, refused(job)
        return NONE
    # A queue may drop a delivery of a job it knows has ended (its own durable record,
    # which is a protection too); so a worker that takes it up shows that at a
    # failpoint, and one that never does is given a while to act before the end is read.
    assert trial.target is not None
    poll = trial.target.poll_s or 0.0
    deadline = t + max(TAKE_UP_S, 2 * trial.config.lease_ttl_s) + TAKE_UP_POLLS * poll
    while not any(h.job == job and h.t > t for h in trial.rendezvous.hits()):
        if time.monotonic() >= deadline:
            # A queue may drop a delivery of a job it knows has ended; then the cell
            # exercised nothing, and says so (a second write would have shown a take-up).
            if len(trial.writes(job)) > 1:
                trial.reached, trial.reached_by = True, "provider"
            elif not trial.rendezvous.hits():
                trial.reached, trial.reached_by, trial.exercised = True, None, unseen(job)
            else:
                trial.reached, trial.reached_by = False, None
                trial.exercised = not_taken_up(job, deadline - t, what="redelivery")
            return NONE
        trial.sleep(0.02)
    trial.reached, trial.reached_by = True, "failpoint"
    # Its status may say "done" all along: give the worker a lease to act on it (a worker
    # that writes again does so within its lease, or loses the job).
    trial.sleep(trial.config.lease_ttl_s)
    return NONE
