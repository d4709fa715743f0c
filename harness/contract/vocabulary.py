"""The words every part of crashpoint agrees on.

Kept free of imports: the reference worker imports it at every start (through its
mutants' registry), and a worker's start-up is on every trial's path.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum

VERSION = "0.1.0"

#: The schema names of the documents crashpoint writes (see docs/results.md).
RESULTS_SCHEMA = "crashpoint.results/1"

#: The oracle's invariants, in the order it checks them: the design's seven, then those
#: added since.
INVARIANTS = (
    "no_duplicate_effect",
    "no_retry_while_unknown",
    "stable_key_and_payload",
    "fenced_writes",
    "nothing_lost",
    "bounded_retries",
    "ambiguity_goes_to_review",
    "resumes_at_missing_step",
    # Added since: every action for a job acts under the job's own, verified identity.
    "identity_bound",
    # Added since: a declared least backoff between a refused write and its retry.
    "min_backoff",
    # Added since: no attempt that starts after a job's cancel was acknowledged makes an effect.
    "no_effect_after_cancel",
)

#: Invariants that speak of the end state; they need quiescence to be decided.
LIVENESS = frozenset({"nothing_lost"})

#: The fake providers' kinds (see fake_providers/README.md).
PROVIDER_KINDS = ("idempotent", "plain", "unqueryable")

#: Personas: real APIs' wire formats, each over the kind whose semantics it has
#: (docs/providers.md). ``kind = "stripe"`` in crashpoint.toml is an idempotent provider
#: that a Stripe SDK can be pointed at.
PERSONA_KINDS = {
    "stripe": "idempotent",
    "slack": "plain",
    "sendgrid": "unqueryable",
    "resend": "idempotent",
    "github": "plain",
    # The model answers plans, never effects: its calls are recorded, nothing commits.
    "openai": "plain",
    # Plain SMTP on a port of its own (aiosmtpd): no key, no lookup.
    "smtp": "unqueryable",
    # An in-house API declared by its routes: idempotent with a key; without one, plain
    # if it has a lookup, else unqueryable (fake_providers/personas/declared.py).
    "http": "idempotent",
}
#: The persona whose wire is declared in crashpoint.toml rather than written.
DECLARED = "http"


class Verdict(StrEnum):
    """What a trial proved."""

    HELD = "held"
    VIOLATED = "violated"
    #: Could not decide: timeout, fault never reached, harness trouble.
    INCONCLUSIVE = "inconclusive"
    #: A prerequisite (such as Toxiproxy) is missing.
    SKIPPED = "skipped"


#: The one severity order of verdicts, worst first: wherever several verdicts speak for
#: one thing (a matrix cell, a headline, the exit code of several passes), the worst
#: speaks. A violation outweighs everything; an unproven trial (inconclusive, skipped)
#: must never look as good as a held one (Jepsen's ``valid-priorities``: one table).
VERDICT_ORDER: tuple[Verdict, ...] = (
    Verdict.VIOLATED,
    Verdict.INCONCLUSIVE,
    Verdict.SKIPPED,
    Verdict.HELD,
)


def severity(verdict: str) -> int:
    """How bad ``verdict`` is by :data:`VERDICT_ORDER`: held 0, up to violated."""
    return len(VERDICT_ORDER) - 1 - VERDICT_ORDER.index(Verdict(verdict))


class ExitCode(IntEnum):
    """The CLI's exit codes (stable)."""

    HELD = 0
    VIOLATED = 1
    USAGE = 2
    INCONCLUSIVE = 3


class EventKind(StrEnum):
    """The kinds of trial-history events; the report colours them by kind."""

    WORKER_START = "worker_start"
    WORKER_EXIT = "worker_exit"
    ENQUEUE = "enqueue"
    CLAIM = "claim"
    FAILPOINT = "failpoint"
    SIGNAL = "signal"
    #: A worker outlived SIGTERM (or another catchable signal) for the declared grace
    #: period, so the harness sent SIGKILL.
    ESCALATE = "escalate"
    #: A write reached a provider (its fields carry the whole arrival).
    ARRIVAL = "arrival"
    #: A provider committed an effect (its fields carry the effect).
    COMMIT = "commit"
    HOLD = "hold"
    RELEASE = "release"
    TOXIC_ON = "toxic_on"
    TOXIC_OFF = "toxic_off"
    LEASE_EXPIRED = "lease_expired"
    #: A lookup reached a provider, or the ledger recorded a reconcile outcome.
    RECONCILE = "reconcile"
    RESULT_WRITE = "result_write"
    RESTORE = "restore"
    #: A request to a provider's control or oracle API without the run's secret (a worker
    #: reaching for the ground truth); the provider refused it with 403.
    CONTROL_DENIED = "control_denied"
    #: An MCP provider's tools and the annotations they declare, once at trial start.
    TOOLS = "tools"
    #: A model persona answered (or refused) a request for a job's plan: no effect.
    PLAN = "plan"
    #: The harness cancelled a job through the target (its ``cancel`` command, or the
    #: reference's ledger) and the target acknowledged it, at this moment.
    CANCEL = "cancel"
    NOTE = "note"
