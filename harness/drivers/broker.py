"""``broker_restart``: the target's broker is stopped (SIGTERM or SIGKILL) and started
again on the same data and port, while an attempt is in flight or while jobs wait in it
(issue 34: a running job dispatched again after the broker or orchestrator restarted,
reported for Hatchet, for BullMQ after a Redis failover, for Dramatiq after a Redis
restart).

``attempt_in_flight``: the first job's attempt is held at ``after_external_call`` (its
effect made, not yet recorded or acknowledged); the broker goes down, the attempt is
let go, and it ends (records, acknowledges) while the broker is down: once it has
reported ``after_local_write`` (or after four outages' time if it cannot record its end
without the broker), one lease more (at least :data:`DOWN_MIN_S`), then the broker
comes back. The other jobs of the batch wait
in the queue meanwhile. ``jobs_queued``: every job is enqueued, the broker restarts
before any worker has started, then the workers start.

A worker whose broker vanished may exit; a supervisor (systemd, Kubernetes) would start
it again, and so does the harness for two outages' time after the broker is back (each
worker once, recorded in the history), so
that what is judged is what the worker did with its jobs, never how it handles losing
its connection. Invariants as for duplicate delivery, plus ``nothing_lost``: every job
the broker acknowledged before the restart ends.
"""

from __future__ import annotations

import signal
import time

from harness.brokers import Broker
from harness.contract.errors import Inconclusive
from harness.drivers.review import NONE
from harness.trial import Trial

#: Where the attempt is held when the broker goes down: its effect made, its end not
#: yet recorded, so the record and the acknowledgement both come during the outage.
POINT = "after_external_call"
#: The least time the broker stays down while the attempt ends (else one lease).
DOWN_MIN_S = 0.5
#: How long the let-go attempt gets to record its end while the broker is down, in
#: outages (the outage proper follows it).
RECORD_WITHIN_OUTAGES = 4.0
#: How long after the broker's return a worker that exits is started again, in outages.
SUPERVISE_LEASES = 2.0
SUPERVISE_POLL_S = 0.05
#: Why the row does not apply to a target without a broker.
NO_BROKER = (
    "broker_restart restarts the target's broker; the target declares none (declare "
    '[target.broker] kind = "redis" and the variable its workers read the URL from)'
)
#: Why it does not apply to the reference worker.
REFERENCE_NO_BROKER = (
    "broker_restart restarts a queue's broker; the reference worker's queue is its "
    "ledger (SQLite or PostgreSQL), whose own faults are the ledger rows"
)


def broker_restart(trial: Trial) -> frozenset[str]:
    """Restart the trial's broker with the cell's signal, in flight or while queued."""
    broker = _broker(trial)
    sig = signal.Signals[trial.cell.signal or "SIGKILL"]
    if trial.cell.point == "jobs_queued":
        trial.enqueue_batch()
        _stop(trial, broker, sig)
        _start(trial, broker)
        trial.reached, trial.reached_by = True, None
        trial.start_worker()
        return NONE
    job = trial.enqueue_batch()
    gate = trial.hold(POINT, job=job, or_next=True)
    trial.start_worker()
    hit = trial.wait_hit(gate, what=f"failpoint {POINT} for {job}")
    job = hit.job or job
    _stop(trial, broker, sig)
    resumed = time.monotonic()
    hit.resume()
    _wait_recorded(trial, job, since=resumed)
    trial.sleep(_outage_s(trial))
    _start(trial, broker)
    _supervise(trial, SUPERVISE_LEASES * max(DOWN_MIN_S, trial.config.lease_ttl_s))
    return NONE


def _outage_s(trial: Trial) -> float:
    return max(DOWN_MIN_S, trial.config.lease_ttl_s)


def _wait_recorded(trial: Trial, job: str, *, since: float) -> None:
    """Until the let-go attempt reports ``after_local_write`` (its end recorded; its
    acknowledgement comes next, within the outage that follows), at most
    :data:`RECORD_WITHIN_OUTAGES` outages: a worker whose record needs the broker (a
    lease kept in Redis) cannot record its end before the broker is back."""
    deadline = since + RECORD_WITHIN_OUTAGES * _outage_s(trial)
    while time.monotonic() < deadline:
        trial.observer.drain()
        if any(
            e.kind == "failpoint"
            and e.job == job
            and e.t >= since
            and e.fields.get("point") == "after_local_write"
            for e in trial.history.events()
        ):
            return
        trial.sleep(SUPERVISE_POLL_S)


def _broker(trial: Trial) -> Broker:
    broker = getattr(trial.target, "broker", None)
    if not isinstance(broker, Broker):
        raise Inconclusive(NO_BROKER)
    return broker


def _stop(trial: Trial, broker: Broker, sig: signal.Signals) -> None:
    trial.history.append(
        "supervisor",
        "signal",
        pid=broker.pid,
        signal=sig.name,
        text=f"{sig.name} to the broker ({broker.kind} on port {broker.port})",
    )
    broker.stop(sig)


def _start(trial: Trial, broker: Broker) -> None:
    broker.start_again()
    trial.history.append(
        "supervisor",
        "note",
        pid=broker.pid,
        text=f"the broker is back on port {broker.port}, on the same data",
    )


def _supervise(trial: Trial, window_s: float) -> None:
    """For ``window_s`` after the broker came back, start again (once each) the workers
    that exited since it went down: a worker may find its connection gone only when it
    next uses it."""
    restarted: set[str] = set()
    deadline = time.monotonic() + window_s
    while True:
        for handle in list(trial.workers.values()):
            if handle.name in restarted or handle.name in trial.paused or handle.alive():
                continue
            restarted.add(handle.name)
            trial.history.append(
                "supervisor",
                "note",
                worker=handle.name,
                text=f"{handle.name} exited after the broker went down; started again, as "
                "a supervisor would",
            )
            trial.start_worker()
        if time.monotonic() >= deadline:
            return
        trial.sleep(SUPERVISE_POLL_S)
