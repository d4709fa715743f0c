"""The invariants by name, and the two readings of one record they make: what was
violated, and what could not be judged (and why).

Both take the :class:`~harness.oracle.facts.Record` the history was read into once
(:func:`harness.oracle.judge.judge`), never the events again: reading the history is
the oracle's largest cost on a long trial.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.contract.vocabulary import LIVENESS
from harness.oracle import backoff, cancel
from harness.oracle.evidence import Violation
from harness.oracle.facts import Record, TrialFacts
from harness.oracle.fencing import fenced_writes
from harness.oracle.identity import identity_bound, unjudged_reason
from harness.oracle.liveness import nothing_lost
from harness.oracle.safety import (
    ambiguity_goes_to_review,
    bounded_retries,
    no_duplicate_effect,
    no_retry_while_unknown,
    stable_key_and_payload,
)
from harness.oracle.steps import resumes_at_missing_step

#: Why an invariant (or part of one) could not be judged, by what the target left out.
NO_JOB_STATES = "the target reports no job outcomes: declare [target] status in crashpoint.toml"
NO_REVIEW_STATES = (
    "whether the unreconcilable job ended in needs_review is not judged (its replays are): "
    "the target reports no job outcomes: declare [target] status in crashpoint.toml"
)
NO_CLAIMS = (
    "the target reports no lease claims (a ledger whose claims become events), so a "
    "result or a call under a stale token cannot be told from a current one"
)
NO_MAX_ATTEMPTS = (
    "only that retries stop is checked: the target declares no max_attempts; declare "
    "[target] max_attempts in crashpoint.toml"
)

Invariant = Callable[[Record, TrialFacts], list[Violation]]

#: Every invariant by name, in the order they are checked: safety first, then liveness.
CHECKS: dict[str, Invariant] = {
    "no_duplicate_effect": no_duplicate_effect,
    "no_retry_while_unknown": no_retry_while_unknown,
    "stable_key_and_payload": stable_key_and_payload,
    "fenced_writes": fenced_writes,
    "bounded_retries": bounded_retries,
    backoff.NAME: backoff.min_backoff,
    cancel.NAME: cancel.no_effect_after_cancel,
    "ambiguity_goes_to_review": ambiguity_goes_to_review,
    "resumes_at_missing_step": resumes_at_missing_step,
    "identity_bound": identity_bound,
    "nothing_lost": nothing_lost,
}


def violations_in(record: Record, facts: TrialFacts) -> list[Violation]:
    """Every violation ``record`` shows, safety first; liveness only at quiescence (an
    end state not reached in the bound proves nothing lost)."""
    found: list[Violation] = []
    for name, invariant in CHECKS.items():
        if name in LIVENESS and not facts.quiescent:
            continue
        found += invariant(record, facts)
    return found


def unjudged_in(record: Record, facts: TrialFacts) -> dict[str, str]:
    """Invariant -> why it (or the part named) could not be judged in this trial.

    A trial whose judged invariants all held is ``held`` with these notes: what the
    target does not report is said, never turned into a verdict either way.
    """
    out = {}
    if not record.claim_rows:
        out["fenced_writes"] = NO_CLAIMS
    if facts.job_states is None:
        out["nothing_lost"] = NO_JOB_STATES
        if facts.review_expected:
            out["ambiguity_goes_to_review"] = NO_REVIEW_STATES
    if facts.max_attempts is None:
        out["bounded_retries"] = NO_MAX_ATTEMPTS
    intervals = backoff.intervals_note(record, facts)
    if intervals is not None:
        out[backoff.NAME] = intervals
    identities = unjudged_reason(record)
    if identities is not None:
        out["identity_bound"] = identities
    return out
