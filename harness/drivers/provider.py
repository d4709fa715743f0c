"""Provider faults armed through its control API: errors, a late answer, dead lookups."""

from __future__ import annotations

import time

from fake_providers import Fault
from harness.contract.errors import Inconclusive
from harness.drivers.review import NONE, review_if_unqueryable
from harness.trial import Trial

#: Points that fail past the target's retry cap: without a declared cap there is none to
#: fail past (borrowing another worker's would fail a correct worker with a larger one),
#: so the run skips them with :data:`NO_CAP`.
NEEDS_CAP = frozenset({"fail_past_cap"})
NO_CAP = "the target declares no max_attempts"


def provider_error_before_commit(trial: Trial) -> frozenset[str]:
    """5xx before commit: once (a bounded retry succeeds) or past the retry cap."""
    assert trial.target is not None
    job = trial.enqueue_batch()
    cap = trial.target.max_attempts
    if trial.cell.point in NEEDS_CAP:
        if cap is None:
            raise Inconclusive(f"{trial.cell.point}: {NO_CAP}")
        times = cap + 1
    else:
        times = 1
    trial.arm(Fault("fail_before_commit", job=job, times=times, status=503))
    trial.start_worker()
    trial.reached = True
    return NONE


#: How many of a job's first writes ``retry_backoff`` refuses: enough for several retry
#: intervals, and always one fewer than the target's cap, so the job can still succeed.
REFUSED_WRITES = 3
#: A target whose cap allows one write never retries: there is no interval to see.
NO_RETRY = "the target declares max_attempts = 1: it never retries, so no backoff can be seen"
#: Between two looks for the first refusal in the history (a provider row, polled).
REFUSAL_POLL_S = 0.02


def refused_repeatedly(trial: Trial) -> frozenset[str]:
    """503 before commit for the job's first writes, so the worker retries several times
    and the providers' arrivals show each retry's interval (``min_backoff``)."""
    assert trial.target is not None
    job = trial.enqueue_batch()
    cap = trial.target.max_attempts
    times = REFUSED_WRITES if cap is None else min(REFUSED_WRITES, cap - 1)
    if times < 1:
        raise Inconclusive(f"{trial.cell.point}: {NO_RETRY}")
    trial.arm(Fault("fail_before_commit", job=job, times=times, status=503))
    trial.start_worker()
    # Reached once the provider refused a write: a row whose refusals never came would
    # have no interval to judge, and must not read as held.
    deadline = time.monotonic() + trial.reach_s
    while not any(w.fields.get("fault") == "fail_before_commit" for w in trial.writes(job)):
        if time.monotonic() > deadline:
            raise Inconclusive(f"no write of {job} reached the provider in {trial.reach_s:g} s")
        trial.sleep(REFUSAL_POLL_S)
    trial.reached, trial.reached_by = True, "provider"
    return NONE


def delayed_response(trial: Trial) -> frozenset[str]:
    """The provider commits, then answers after the worker's client timeout."""
    job = trial.enqueue_batch()
    delay = trial.config.http_timeout_s * 2
    fault_id = trial.arm(Fault("delay_response", job=job, delay_s=delay))
    del fault_id
    trial.start_worker()
    trial.reached = True
    return review_if_unqueryable(trial, job)


#: How long past the worker's client timeout the provider holds the write before commit:
#: long enough for the worker to see its call time out and try again while it is held.
IN_FLIGHT_TIMEOUTS = 3


def held_past_client_timeout(trial: Trial) -> frozenset[str]:
    """The provider holds the write before commit past the worker's client timeout, then
    commits it by itself; the worker is never killed.

    A worker that retries under the same key meanwhile is answered 409 (in flight): it
    must take that as unknown, not as a failure to retry under a new key, since the
    first write commits when the hold ends. Fairness: the hold ends with a commit at its
    own deadline, however late the harness is, so the outcome is always decidable.
    """
    job = trial.enqueue_batch()
    hold_s = trial.config.http_timeout_s * IN_FLIGHT_TIMEOUTS
    fault_id = trial.arm(
        Fault("hold_before_commit", job=job, release_after_s=hold_s, release_outcome="commit")
    )
    trial.start_worker()
    held = trial.wait_held(fault_id, what=f"provider hold for {job}")
    # The trial waits out the hold: ended early by quiescence, the held write would be
    # dropped at teardown, never committed, and a retry under a new key would look safe.
    trial.sleep(max(0.0, held.t_mono + hold_s - time.monotonic()))
    trial.release(fault_id, "commit")
    return NONE


def lookup_unavailable(trial: Trial) -> frozenset[str]:
    """Crash after the call, then make the recovering worker's lookups fail with 503."""
    job = trial.enqueue_batch()
    gate = trial.hold("after_external_call", job=job, or_next=True)
    w1 = trial.start_worker()
    hit = trial.wait_hit(gate, what=f"failpoint after_external_call for {job}")
    job = hit.job or job
    trial.arm(Fault("fail_lookup", job=job, times=2, status=503))
    trial.crash(w1, "SIGKILL", hit=hit)
    trial.start_worker()
    return NONE
