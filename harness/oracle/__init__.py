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
from collections.abc import Sequence

from harness.history import Event
from harness.oracle import hygiene  # noqa: F401  (registers the key_hygiene warning)
from harness.oracle.checks import (
    CHECKS,
    NO_CLAIMS,
    NO_JOB_STATES,
    NO_MAX_ATTEMPTS,
    NO_REVIEW_STATES,
    Invariant,
    unjudged_in,
    violations_in,
)
from harness.oracle.desk import review_rows
from harness.oracle.evidence import Violation
from harness.oracle.facts import JobFinal, TrialFacts, read
from harness.oracle.judge import Judgement, judge, verdict_of
from harness.oracle.trace import trace_rows
from harness.oracle.warn import WARNINGS, warning_json, warnings_of

__all__ = [
    "CHECKS",
    "NO_CLAIMS",
    "NO_JOB_STATES",
    "NO_MAX_ATTEMPTS",
    "NO_REVIEW_STATES",
    "WARNINGS",
    "Invariant",
    "JobFinal",
    "Judgement",
    "TrialFacts",
    "Violation",
    "check",
    "judge",
    "review_rows",
    "trace_rows",
    "unjudged",
    "verdict_of",
    "warning_json",
    "warnings_of",
]


def check(events: Sequence[Event], facts: TrialFacts) -> list[Violation]:
    """Every violation in ``events``, safety first; liveness only at quiescence.

    Only the violations: a trial is judged whole by :func:`judge`. ``events`` is the
    history sorted by time, as written to results.json: violations point into it.
    """
    # See judge(): the records live until the checks return, so collections free nothing.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return violations_in(read(events), facts)
    finally:
        if collecting:
            gc.enable()


def unjudged(events: Sequence[Event], facts: TrialFacts) -> dict[str, str]:
    """Invariant -> why it (or the part named) could not be judged (:func:`unjudged_in`)."""
    return unjudged_in(read(events), facts)
