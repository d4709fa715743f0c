"""Scenario drivers: how each row of the injection table is played against a target.

A driver gets a set-up :class:`~harness.trial.Trial`, applies the scenario's fault at its
boundary, starts whatever recovery the scenario calls for, and returns the jobs whose
only safe end is needs_review. Quiescence and the oracle are the trial's business.
"""

from __future__ import annotations

import threading
import time

from fake_providers import Fault
from harness.contract.errors import Inconclusive
from harness.target import TargetAdapter
from harness.trial import Trial
from harness.verdict import Driver

NONE: frozenset[str] = frozenset()


def review_if_unqueryable(trial: Trial, job: str) -> frozenset[str]:
    """Where the provider has no read path, an unknown write can only end in review."""
    if trial.cell.provider == "unqueryable" and trial.cell.scenario.unknown_write:
        return frozenset({job})
    return NONE


def crash_at_failpoint(trial: Trial) -> frozenset[str]:
    """Kill the worker exactly at a failpoint, then let a fresh worker recover."""
    job = trial.enqueue_batch()
    gate = trial.hold(trial.cell.point, job=job)
    w1 = trial.start_worker()
    hit = trial.wait_hit(gate, what=f"failpoint {trial.cell.point} for {job}")
    died_there = trial.crash(w1, trial.cell.signal or "SIGKILL", hit=hit)
    trial.start_worker()
    if trial.cell.point == "before_external_call" or not died_there:
        return NONE
    return review_if_unqueryable(trial, job)


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


def duplicate_delivery(trial: Trial) -> frozenset[str]:
    """Deliver the job again, to a second consumer, while the first one's call is in flight.

    The first delivery's request is held at the provider; the second consumer (a ledger
    of its own, as when one message reaches two subscribers) sends its own request for
    the same job. Only the provider's idempotency can keep the effect single, and the
    second consumer must not read "in flight" as "failed".
    """
    job = trial.enqueue_batch()
    fault_id = trial.arm(Fault("hold_before_commit", job=job))
    trial.start_worker()
    trial.wait_held(fault_id, what=f"first delivery's request for {job}")
    trial.reached = False  # reached once the duplicate meets the held request
    other = trial.add_consumer(job)
    trial.start_worker(consumer=other)
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and not trial.reached:
        trial.reached = len(trial.writes(job)) >= 2
        trial.sleep(0.02)
    if not trial.reached:
        raise Inconclusive(f"the second delivery of {job} never reached the provider")
    trial.release(fault_id, "commit")
    return NONE


def lease_expiry_slow_worker(trial: Trial) -> frozenset[str]:
    """SIGSTOP the owner at a boundary past its lease; another finishes; SIGCONT."""
    job = trial.enqueue_batch()
    gate = trial.hold(trial.cell.point, job=job)
    w1 = trial.start_worker()
    hit = trial.wait_hit(gate, what=f"failpoint {trial.cell.point} for {job}")
    trial.send(w1, "SIGSTOP")
    # Let the frozen worker go at the boundary: it reads the answer only when thawed.
    hit.resume()
    trial.sleep(trial.config.lease_ttl_s * 1.5)
    trial.start_worker()
    if not trial.wait_quiescent():
        raise Inconclusive("the second worker did not finish while the owner was stopped")
    trial.send(w1, "SIGCONT")
    # The thawed owner acts now (a late call or a late result write) or never.
    trial.sleep(max(trial.config.settle_s, trial.config.lease_ttl_s))
    return NONE


def state_store_restore(trial: Trial) -> frozenset[str]:
    """Finish the job, restore the ledger from before it ran, restart in recovery."""
    assert trial.target is not None
    job = trial.enqueue_batch()
    snapshot = trial.target.snapshot()
    w1 = trial.start_worker()
    if not trial.wait_quiescent():
        raise Inconclusive("the job did not finish before the restore")
    trial.reached = True
    trial.crash(w1, trial.cell.signal or "SIGKILL")
    trial.target.restore(snapshot)
    trial.history.append("supervisor", "restore", note="ledger restored from before the job")
    trial.start_worker(recovery=True)
    return review_if_unqueryable(trial, job)


def provider_error_before_commit(trial: Trial) -> frozenset[str]:
    """5xx before commit: once (a bounded retry succeeds) or past the retry cap."""
    job = trial.enqueue_batch()
    times = 1 if trial.cell.point == "fail_once" else trial.config.max_attempts + 1
    trial.arm(Fault("fail_before_commit", job=job, times=times, status=503))
    trial.start_worker()
    trial.reached = True
    return NONE


def simultaneous_trigger(trial: Trial) -> frozenset[str]:
    """Trigger the same payload twice at the same moment, with two workers waiting.

    Each trigger has its own connection to the target, as two webhook deliveries would.
    """
    assert trial.target is not None
    trial.start_worker()
    trial.start_worker()
    job = "j-0001"
    start = threading.Barrier(2)
    errors: list[BaseException] = []
    twin = trial.target.twin()

    def trigger(target: TargetAdapter) -> None:
        try:
            start.wait(timeout=5)
            trial.enqueue(job, target=target)
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=trigger, args=(t,)) for t in (trial.target, twin)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    if twin is not trial.target:
        twin.close()
    if errors:
        raise Inconclusive(f"triggering {job} twice failed: {errors[0]!r}")
    trial.reached = True
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


def lookup_unavailable(trial: Trial) -> frozenset[str]:
    """Crash after the call, then make the recovering worker's lookups fail with 503."""
    job = trial.enqueue_batch()
    gate = trial.hold("after_external_call", job=job)
    w1 = trial.start_worker()
    hit = trial.wait_hit(gate, what=f"failpoint after_external_call for {job}")
    trial.arm(Fault("fail_lookup", job=job, times=2, status=503))
    trial.crash(w1, "SIGKILL", hit=hit)
    trial.start_worker()
    return NONE


DRIVERS: dict[tuple[str, str | None], Driver] = {
    ("crash_before_external_call", None): crash_at_failpoint,
    ("crash_after_external_success", None): crash_at_failpoint,
    ("crash_during_external_call", None): crash_during_call,
    ("duplicate_delivery", None): duplicate_delivery,
    ("lease_expiry_slow_worker", None): lease_expiry_slow_worker,
    ("state_store_restore", None): state_store_restore,
    ("provider_error_before_commit", None): provider_error_before_commit,
    ("simultaneous_trigger", None): simultaneous_trigger,
    ("ambiguous_timeout", "provider_delay_after_commit"): delayed_response,
    ("provider_down_during_reconcile", "provider_lookup_503"): lookup_unavailable,
}


def driver_for(scenario: str, point: str) -> Driver | None:
    """The driver of a scenario at a point (a point-specific one first)."""
    from harness import drivers_net as net

    network: dict[tuple[str, str | None], Driver] = {
        ("ambiguous_timeout", "toxic_latency"): net.response_lost,
        ("ambiguous_timeout", "toxic_timeout"): net.response_lost,
        ("reset_after_commit", None): net.response_lost,
        ("provider_down_during_reconcile", "proxy_disabled"): net.proxy_down_while_reconciling,
        ("ledger_link_faults", None): net.ledger_link_fault,
        ("slow_lease_renewal", None): net.slow_lease_renewal,
    }
    for table in (DRIVERS, network):
        found = table.get((scenario, point)) or table.get((scenario, None))
        if found is not None:
            return found
    return None
