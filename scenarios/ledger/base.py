"""The ledger seam: what the reference worker and its target adapter need from a store.

Two implementations stand behind :class:`LedgerStore` (``sqlite.py`` and ``postgres.py``);
both run the same statements from ``_sql.py`` and pass the same test suite. Every method
that changes a job takes the caller's ``now`` (``time.monotonic()`` seconds): leases and
audit rows share the machine-wide monotonic clock that providers and the harness use, and
tests can drive expiry without sleeping.

The states follow the seeds' three ledgers:

=========== ==============================================================
delivery    queued, leased, acknowledged, dead_lettered
execution   not_started, running, succeeded, failed, unknown
side effect not_attempted, submitted, confirmed, ambiguous
=========== ==============================================================

Rows and claims are named tuples, not dataclasses: every worker imports this module at
start, and dataclasses (with the inspect module it loads, and the code it generates
for each class) was a third of a worker's own imports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, Protocol

DeliveryState = Literal["queued", "leased", "acknowledged", "dead_lettered"]
ExecutionState = Literal["not_started", "running", "succeeded", "failed", "unknown"]
SideEffectState = Literal["not_attempted", "submitted", "confirmed", "ambiguous"]
ReconcileOutcome = Literal["confirmed", "not_found", "conflict", "unavailable", "unqueryable"]

DELIVERY_STATES = ("queued", "leased", "acknowledged", "dead_lettered")
EXECUTION_STATES = ("not_started", "running", "succeeded", "failed", "unknown")
SIDE_EFFECT_STATES = ("not_attempted", "submitted", "confirmed", "ambiguous")
RECONCILE_OUTCOMES = ("confirmed", "not_found", "conflict", "unavailable", "unqueryable")

#: Tables whose rows are the job state proper; a snapshot/restore acts on these only.
STATE_TABLES = ("jobs", "attempts", "effects", "reconcile_queue", "outbox", "job_steps")
#: Audit tables the oracle reads; never rolled back, or a restore would erase evidence.
AUDIT_TABLES = ("claims", "result_writes", "reconciles")


class Claimed(NamedTuple):
    """A job this worker now owns under ``token`` until ``lease_expires_at``."""

    job_id: str
    provider: str
    body: dict[str, Any]
    attempt: int
    token: int
    worker_id: str
    lease_expires_at: float
    execution_state: str
    side_effect_state: str
    #: The job sits in the reconcile queue (an earlier attempt lost sight of its call,
    #: or a recovery after a restore put it there).
    needs_reconcile: bool
    idempotency_key: str | None
    last_error: str | None
    #: A multi-step job's ordered steps, ``(step, provider)``; empty for a single step.
    steps: tuple[tuple[str, str], ...] = ()
    #: The steps whose effect the ledger records as confirmed.
    steps_done: frozenset[str] = frozenset()


class JobRow(NamedTuple):
    job_id: str
    provider: str
    delivery_state: str
    execution_state: str
    side_effect_state: str
    needs_review: bool
    attempts: int
    idempotency_key: str | None
    token: int
    owner: str | None = None
    lease_expires_at: float | None = None
    client_marker: str | None = None
    result_ref: str | None = None
    review_reason: str | None = None
    last_error: str | None = None


class ClaimRow(NamedTuple):
    job_id: str
    attempt: int
    token: int
    worker_id: str
    t_mono: float
    lease_expires_at: float


class ResultWriteRow(NamedTuple):
    job_id: str
    attempt: int
    token: int
    worker_id: str
    accepted: bool
    t_mono: float
    #: What the write tried to record: succeeded, failed, dead_lettered, unknown,
    #: retry, needs_review.
    outcome: str = ""


class ReconcileRow(NamedTuple):
    job_id: str
    attempt: int
    outcome: str
    t_mono: float


class OutboxRow(NamedTuple):
    outbox_id: str
    job_id: str
    provider: str
    body: dict[str, Any]
    state: str
    #: Sends the relays started for this row (counted before each leaves).
    sends: int
    result_ref: str | None = None


class Dump(NamedTuple):
    """Every row of the state tables (column names, then rows), for snapshot/restore."""

    tables: Mapping[str, tuple[tuple[str, ...], tuple[tuple[Any, ...], ...]]] = MappingProxyType({})


class LedgerStore(Protocol):
    """One ledger; a worker opens one per thread that touches it."""

    def setup(self) -> None:
        """Create the tables if they are missing (safe to call from every process)."""

    def close(self) -> None: ...

    def enqueue(
        self,
        job_id: str,
        provider: str,
        body: Mapping[str, Any],
        *,
        now: float,
        steps: Sequence[tuple[str, str]] = (),
    ) -> bool:
        """Add a logical job (``steps``: a multi-step job's ``(step, provider)`` in order);
        False when it is already there (duplicate deliveries collapse onto the one durable
        record, and the loser reads the winner's state)."""

    def claim(
        self, worker_id: str, *, now: float, ttl_s: float, max_attempts: int | None
    ) -> Claimed | None:
        """Lease the next runnable job (queued and due, or leased with an expired lease),
        incrementing its token and attempt. A job already at ``max_attempts`` is
        dead-lettered instead (None: no cap)."""

    def renew(
        self, c: Claimed, *, now: float, ttl_s: float, check_owner: bool = True
    ) -> float | None:
        """Extend the lease; returns the new expiry, or None when the lease is lost."""

    def acknowledge(self, c: Claimed, *, now: float) -> bool:
        """Mark delivery acknowledged without touching execution (``ack_before_effect``)."""

    def mark_submitted(self, c: Claimed, *, key: str, marker: str | None, now: float) -> bool:
        """Persist the key and ``submitted`` before the call (compare-and-set on owner and
        token); also takes the job off the reconcile queue."""

    def write_result(
        self,
        c: Claimed,
        outcome: str,
        *,
        now: float,
        cas: bool = True,
        result_ref: str | None = None,
        retry_at: float | None = None,
        reason: str | None = None,
    ) -> bool:
        """Record the attempt's outcome with compare-and-set on owner and token; every
        write, accepted or not, leaves a ``result_writes`` row. Outcomes:

        ``succeeded`` effect confirmed, delivery acknowledged;
        ``failed`` clean failure, requeued at ``retry_at``, or dead-lettered when it is None;
        ``unknown`` the call's outcome was not observed: into the reconcile queue, lease kept;
        ``retry`` a reconcile found nothing: requeue at ``retry_at`` under the same key;
        ``needs_review`` stop automation, ``reason`` says why.
        """

    def complete_step(self, c: Claimed, step: str, *, result_ref: str | None, now: float) -> bool:
        """Record a step of a multi-step job as confirmed (compare-and-set on owner and
        token) and make the job ready for its next step; the job stays leased."""

    def redeliver(self, job_id: str, *, now: float) -> bool:
        """The queue lost an acknowledgement: an acknowledged job is delivered again,
        with its execution and effect records as they are. False if it was not acked."""

    def record_reconcile(self, c: Claimed, outcome: str, *, now: float, next_at: float) -> None:
        """Audit one reconcile lookup and note the next try in the reconcile queue."""

    def request_cancel(self, job_id: str, *, now: float) -> bool:
        """Record a request to cancel ``job_id``; False when one was already recorded."""

    def cancel_requested(self, job_id: str) -> bool:
        """Someone asked to cancel ``job_id``: no attempt may make its effect now."""

    def mark_recovery(self, *, now: float) -> int:
        """Put every unfinished job on the reconcile queue (after a state-store restore)."""

    def jobs(self) -> Sequence[JobRow]: ...
    def claims(self) -> Sequence[ClaimRow]: ...
    def result_writes(self) -> Sequence[ResultWriteRow]: ...
    def reconciles(self) -> Sequence[ReconcileRow]: ...

    def write_outbox(self, c: Claimed, *, outbox_id: str, now: float) -> bool:
        """Close the attempt by writing its message to the outbox, in one transaction with
        the job's state (compare-and-set on owner and token); a relay sends it."""

    def pending_outbox(self, *, limit: int = 16) -> Sequence[OutboxRow]: ...

    def count_outbox_send(self, outbox_id: str) -> int:
        """Count a send before it leaves; the send's number."""

    def mark_outbox_sent(self, outbox_id: str, *, result_ref: str | None, now: float) -> bool:
        """Mark the row sent and acknowledge its job, in one transaction."""

    def outbox(self) -> Sequence[OutboxRow]: ...

    def dump(self) -> Dump:
        """Copy the state tables."""

    def load(self, dump: Dump) -> None:
        """Replace the state tables with ``dump``, keeping fencing tokens monotonic."""
