"""The oracle: the invariants, decided from the trial history, provider truth first.

The oracle only reads: the history's provider events (every arrival and commit, what
really happened at the point of consequence), its ledger events when the target has a
ledger (claims, result writes), and the facts that are no events (:class:`TrialFacts`:
jobs, provider kinds, the ledger's final job states). It never asks the worker what it
thinks happened. Each violation points at the events it was decided from, by their index
in the event list the oracle was given.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence

from harness.contract.vocabulary import LIVENESS
from harness.history import Event
from harness.oracle import hygiene  # noqa: F401  (registers the key_hygiene warning)
from harness.oracle.desk import review_rows
from harness.oracle.evidence import Violation
from harness.oracle.facts import JobFinal, Record, TrialFacts, read
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
from harness.oracle.trace import trace_rows
from harness.oracle.warn import WARNINGS, warning_json, warnings_of

__all__ = [
    "CHECKS",
    "WARNINGS",
    "JobFinal",
    "TrialFacts",
    "Violation",
    "check",
    "review_rows",
    "trace_rows",
    "unjudged",
    "warning_json",
    "warnings_of",
]

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
    "ambiguity_goes_to_review": ambiguity_goes_to_review,
    "resumes_at_missing_step": resumes_at_missing_step,
    "identity_bound": identity_bound,
    "nothing_lost": nothing_lost,
}


def check(events: Sequence[Event], facts: TrialFacts) -> list[Violation]:
    """Every violation in the trial, safety first; liveness only at quiescence.

    ``events`` is the history sorted by time, as written to results.json: violations
    point into it.
    """
    # The oracle builds a record per event and keeps every one until it returns:
    # collections would find nothing to free, and on a long history they cost more
    # than the checks (a 100,000-arrival history runs over twice as fast without).
    collecting = gc.isenabled()
    gc.disable()
    try:
        record = read(events)
        found: list[Violation] = []
        for name, invariant in CHECKS.items():
            if name in LIVENESS and not facts.quiescent:
                continue
            found += invariant(record, facts)
        return found
    finally:
        if collecting:
            gc.enable()


def unjudged(events: Sequence[Event], facts: TrialFacts) -> dict[str, str]:
    """Invariant -> why it (or the part named) could not be judged in this trial.

    A trial whose judged invariants all held is ``held`` with these notes: what the
    target does not report is said, never turned into a verdict either way.
    """
    out = {}
    if not any(e.kind == "claim" for e in events):
        out["fenced_writes"] = NO_CLAIMS
    if facts.job_states is None:
        out["nothing_lost"] = NO_JOB_STATES
        if facts.review_expected:
            out["ambiguity_goes_to_review"] = NO_REVIEW_STATES
    if facts.max_attempts is None:
        out["bounded_retries"] = NO_MAX_ATTEMPTS
    identities = unjudged_reason(read(events))
    if identities is not None:
        out["identity_bound"] = identities
    return out
