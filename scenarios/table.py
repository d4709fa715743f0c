"""The injection table as data.

Each :class:`Scenario` is one row of the table in DESIGN.md: where the fault lands, what
the durable result should be, and what safe recovery looks like. A scenario has one or
more injection points (the rows of the report) and is crossed with the provider kinds
and signals where that makes sense; :func:`cells` expands the cross product.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.contract.vocabulary import PROVIDER_KINDS

ALL = PROVIDER_KINDS
CRASH_SIGNALS = ("SIGKILL", "SIGTERM")


@dataclass(frozen=True)
class Scenario:
    name: str
    injection: str
    expected: str
    recovery: str
    points: tuple[str, ...]
    providers: tuple[str, ...] = ALL
    signals: tuple[str | None, ...] = (None,)
    #: Only meaningful on these ledgers (None: any).
    ledgers: tuple[str, ...] | None = None
    #: Leaves an unknown write that an unqueryable provider cannot reconcile: the only
    #: safe end there is needs_review (see DESIGN "Fairness").
    unknown_write: bool = False
    #: Faults the link between the worker and its ledger database, so only a target whose
    #: ledger the harness can put a proxy in front of (the reference) can run it.
    needs_ledger: bool = False
    #: The provider kinds when the second delivery reaches the same target again (its own
    #: queue redelivers the job, as a command target's does); None: ``providers``. Those
    #: assume a second consumer with a ledger of its own, which only a key can protect.
    redelivery_providers: tuple[str, ...] | None = None
    #: Steps a worker's wall clock (libfaketime): skipped, with the reason, where the
    #: library cannot be loaded, and for a worker whose clock the harness cannot reach.
    wall_clock: bool = False


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "crash_before_external_call",
        "kill at before_external_call",
        "running / not_started",
        "reclaim after lease expiry",
        points=("before_external_call",),
        signals=CRASH_SIGNALS,
    ),
    Scenario(
        "crash_during_external_call",
        "kill while the provider holds the request (before and after commit)",
        "unknown",
        "reconcile by key or marker",
        points=("provider_hold_before_commit", "provider_hold_after_commit"),
        signals=CRASH_SIGNALS,
        unknown_write=True,
    ),
    Scenario(
        "crash_after_external_success",
        "kill at after_external_call",
        "unknown",
        "confirm externally, then close",
        points=("after_external_call",),
        signals=CRASH_SIGNALS,
        unknown_write=True,
    ),
    Scenario(
        "duplicate_delivery",
        "the same logical job delivered twice, concurrently",
        "second attempt",
        "same key, no second effect",
        points=("redelivered_while_in_flight",),
        # Two consumers with ledgers of their own: only a provider key can protect this.
        providers=("idempotent",),
        # Redelivered into the same queue: the target's own state can protect it anywhere.
        redelivery_providers=ALL,
    ),
    Scenario(
        "lease_expiry_slow_worker",
        "SIGSTOP the owner past its lease, let another finish, SIGCONT",
        "stale owner",
        "CAS rejects the late write; no late effect",
        points=("before_external_call", "after_external_call"),
        signals=("SIGSTOP",),
    ),
    Scenario(
        "state_store_restore",
        "restore an older ledger snapshot, restart workers",
        "recovered ledger",
        "reconcile before new side effects",
        points=("restore_after_effect",),
        signals=("SIGKILL",),
        unknown_write=True,
    ),
    Scenario(
        "provider_error_before_commit",
        "5xx before commit",
        "failed attempt",
        "bounded retry succeeds",
        points=("fail_once", "fail_past_cap"),
    ),
    Scenario(
        "simultaneous_trigger",
        "the same payload triggered twice at the same moment",
        "one durable claim",
        "the loser reads the winner's record",
        points=("same_moment",),
    ),
    Scenario(
        "ambiguous_timeout",
        "latency or timeout toxic after the provider committed",
        "unknown",
        "reconcile; unqueryable goes to needs_review",
        points=("provider_delay_after_commit", "toxic_latency", "toxic_timeout"),
        unknown_write=True,
    ),
    Scenario(
        "reset_after_commit",
        "reset_peer on the response after commit",
        "unknown",
        "reconcile before any retry",
        points=("toxic_reset_peer",),
        unknown_write=True,
    ),
    Scenario(
        "provider_down_during_reconcile",
        "provider unreachable while the worker reconciles",
        "unknown (unavailable)",
        "retry reconcile later, no new effect",
        points=("provider_lookup_503", "proxy_disabled"),
        providers=("idempotent", "plain"),
        unknown_write=True,
    ),
    Scenario(
        "ledger_link_faults",
        "latency and reset between the worker and its database",
        "unknown",
        "no effect is repeated",
        points=("ledger_latency", "ledger_reset"),
        ledgers=("postgres",),
        needs_ledger=True,
    ),
    Scenario(
        "slow_lease_renewal",
        "renewals delayed past the lease",
        "lease lost",
        "stop before calling out",
        points=("ledger_latency_past_lease",),
        ledgers=("postgres",),
        needs_ledger=True,
    ),
    Scenario(
        "clock_skew",
        "step the owner's wall clock back or ahead by more than a lease while it is stopped "
        "past its lease (libfaketime); another worker finishes; SIGCONT",
        "stale owner",
        "the lease is checked at the ledger, never by the worker's own clock; no late call",
        points=("worker_behind", "worker_ahead"),
        signals=("SIGSTOP",),
        wall_clock=True,
    ),
    Scenario(
        "identity_lost_on_recovery",
        "kill at before_external_call; the job's login expires or its profile changes to "
        "another account; a fresh worker recovers it",
        "blocked (needs_review)",
        "find the identity refused and stop; never act under an unverified identity",
        points=("session_expired", "profile_changed"),
        signals=("SIGKILL",),
    ),
)

#: Points that need Toxiproxy even inside a scenario that has provider-side points too.
NETWORK_POINTS = frozenset(
    {"toxic_latency", "toxic_timeout", "toxic_reset_peer", "proxy_disabled"}
    | {"ledger_latency", "ledger_reset", "ledger_latency_past_lease"}
)

BY_NAME = {s.name: s for s in SCENARIOS}
