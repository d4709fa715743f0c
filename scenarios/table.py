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
class Step:
    """One step of a multi-step job: an effect at one provider, in the job's order."""

    name: str
    #: The provider the step calls; None: the cell's own provider.
    provider: str | None = None


#: The reference's multi-step job (seed 003): create a ticket, then notify its owner.
TICKET_THEN_NOTIFY = (Step("ticket"), Step("notify", "notify"))
#: The boundaries of each step a multi-step cell crashes at (the last step's local write
#: is the job's own end, which the single-step rows cover).
STEP_BOUNDARIES = ("before_external_call", "after_external_call", "after_local_write")


def step_points(steps: tuple[str, ...]) -> tuple[str, ...]:
    """The points ``boundary@step`` of a multi-step job with these steps, in order."""
    return tuple(
        f"{boundary}@{step}"
        for i, step in enumerate(steps)
        for boundary in STEP_BOUNDARIES
        if i < len(steps) - 1 or boundary != "after_local_write"
    )


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
    #: Runs the reference worker in outbox mode with a relay process beside it, which
    #: only the reference target has.
    needs_outbox: bool = False
    #: A multi-step job: its ordered steps, each at its own provider (the reference's; a
    #: command target plays the scenario with the steps it declares, and only then).
    steps: tuple[Step, ...] = ()
    #: The idempotent provider forgets a key this long after its first use, once the
    #: job has completed (None: the provider's default, a day).
    key_ttl_s: float | None = None
    #: Steps a worker's wall clock (libfaketime): skipped, with the reason, where the
    #: library cannot be loaded, and for a worker whose clock the harness cannot reach.
    wall_clock: bool = False
    #: Kills one child of a worker that runs a pool: only for a target that runs one
    #: (the reference in pool mode, a command target declaring ``pool = true``).
    needs_pool: bool = False
    #: Restarts the target's broker: only for a target that declares one
    #: (``[target.broker]``), which the harness then starts per trial.
    needs_broker: bool = False


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
        "relay_crash_after_send",
        "outbox mode: kill the relay after the provider accepted the message, before the "
        "outbox row is marked sent",
        "outbox row pending, job unacknowledged",
        "a new relay resends under the outbox id; the provider replays, no second effect",
        points=("after_relay_send",),
        # The outbox id is an idempotency key: only a provider that honours keys can
        # tell the resend from a new message without a lookup the relay does not make.
        providers=("idempotent",),
        signals=CRASH_SIGNALS,
        needs_outbox=True,
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
    Scenario(
        "retry_while_in_flight",
        "the provider holds the write before commit past the worker's client timeout, "
        "then commits: a retry under the same key meets the first still in flight",
        "unknown; the retry is refused in flight (409)",
        "a 409 is unknown too: wait or reconcile by key, never retry under a new key",
        points=("hold_past_client_timeout",),
        # Only a key can tell a retry from a new write while the first is in flight: a
        # plain provider's lookup cannot see a request it has not committed yet, so no
        # protocol could protect the cell there (DESIGN, "Fairness").
        providers=("idempotent",),
    ),
)

#: Points that need Toxiproxy even inside a scenario that has provider-side points too.
NETWORK_POINTS = frozenset(
    {"toxic_latency", "toxic_timeout", "toxic_reset_peer", "proxy_disabled"}
    | {"ledger_latency", "ledger_reset", "ledger_latency_past_lease"}
)

#: Multi-step jobs, lost acknowledgements and key retention (issue 14).
SCENARIOS += (
    Scenario(
        "multi_step_job",
        "kill at every boundary of each step of a two-step job (a ticket, then a notification)",
        "the steps done so far, the rest unknown",
        "resume at the missing step; never repeat a step that took effect",
        points=step_points(tuple(s.name for s in TICKET_THEN_NOTIFY)),
        signals=("SIGKILL",),
        unknown_write=True,
        steps=TICKET_THEN_NOTIFY,
    ),
    Scenario(
        "lost_acknowledgement",
        "the job completes, its acknowledgement is lost, and the queue delivers it again",
        "completed, delivered again",
        "the durable record closes it; no second effect",
        points=("redelivered_after_completion",),
    ),
    Scenario(
        "key_retention",
        "a completed job comes again after the provider forgot its idempotency key",
        "completed; the provider's key expired",
        "the worker's durable record, not the provider's memory, prevents a second effect",
        points=("redelivered_after_key_expiry",),
        providers=("idempotent",),
        key_ttl_s=0.3,
    ),
)

#: Faults from the field (issue 34): what real frameworks' users report beyond one
#: worker's boundaries.
SCENARIOS += (
    Scenario(
        "retry_backoff",
        "the provider refuses the job's first writes with 503 before commit, so the "
        "worker retries several times",
        "failed attempts, then one effect (or dead-lettered at the cap)",
        "retry after the declared backoff, never faster: a cap bounds how many, not how fast",
        points=("refused_repeatedly",),
    ),
    Scenario(
        "redelivery_storm",
        "the attempt's owner is stopped past its visibility window at before_external_call, "
        "the redelivered copy too, and a third copy is held in flight: both stale copies "
        "wake while the third owns the job (SIGSTOP, SIGCONT)",
        "three copies, two stale owners",
        "each copy checks its own lease before calling out; only the owner acts",
        points=("two_stale_copies",),
        # At an unqueryable provider the second copy finds the first's write unknown and
        # stops in needs_review before any call, as it must: there is no third copy.
        providers=("idempotent", "plain"),
        signals=("SIGSTOP",),
    ),
    Scenario(
        "child_killed",
        "SIGKILL to the one pool child inside before_external_call, not the worker's tree; "
        "the parent goes on",
        "running, the child gone, the job unacknowledged",
        "the parent never acknowledges a job whose child it lost; the lease lapses and the "
        "job is claimed again",
        points=("pool_child",),
        signals=("SIGKILL",),
        needs_pool=True,
    ),
)

#: The worker's life changed under the job (issue 34): its code upgraded between the
#: crash and the recovery, or the job cancelled while its effect was in flight.
SCENARIOS += (
    Scenario(
        "upgrade_during_recovery",
        "kill at after_external_call; the recovering workers start from the target's "
        "upgraded command",
        "unknown",
        "the new code reconciles the old attempt under the key it was sent with",
        points=("after_external_call",),
        signals=("SIGKILL",),
        unknown_write=True,
    ),
    Scenario(
        "cancel_in_flight",
        "the provider holds the job's write (before or after commit) while the job is "
        "cancelled through the target; then the write is dropped and retries go on",
        "cancelled; at most the in-flight effect",
        "check the cancel before each effect; the in-flight one may land, no later one",
        points=("cancel_before_commit", "cancel_after_commit"),
        # At an unqueryable provider the dropped write goes to needs_review before any
        # retry, cancelled or not: there is no retry to stop.
        providers=("idempotent", "plain"),
    ),
)

#: A queue's broker restarted (issue 34).
SCENARIOS += (
    Scenario(
        "broker_restart",
        "the target's broker is stopped (SIGTERM or SIGKILL) and started again on the same "
        "data: while an attempt ends during the outage, or while jobs wait in it",
        "the jobs in the broker, the in-flight attempt's effect made",
        "the attempt's end is the worker's record, not the broker's acknowledgement: no "
        "job runs again for a lost ack, and no queued job is lost",
        points=("attempt_in_flight", "jobs_queued"),
        signals=CRASH_SIGNALS,
        needs_broker=True,
    ),
)

BY_NAME = {s.name: s for s in SCENARIOS}


def split_point(point: str) -> tuple[str, str | None]:
    """A multi-step cell's point ``boundary@step`` as ``(boundary, step)``; else
    ``(point, None)``."""
    boundary, _, step = point.partition("@")
    return boundary, step or None
