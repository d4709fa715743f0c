"""Warnings: findings that do not break an invariant, and fail the gate only when told to.

A trial with a warning still held: every effect happened exactly once. A warning says
what a reviewer should still see (an effect no log ties back to its job, a secret inside
an idempotency key). ``--fail-on-warning`` makes a run with any warning exit 1; without
it they are reported and counted, never turned into a verdict.

Each check reads the same record and facts as the invariants and answers with
:class:`~harness.oracle.evidence.Violation` rows whose ``invariant`` field holds the
warning's name, so evidence and cited events work the same way in the report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from harness.history import Event
from harness.oracle.annotations import NAME as TOOL_ANNOTATIONS
from harness.oracle.annotations import tool_annotations
from harness.oracle.evidence import Violation
from harness.oracle.facts import Record, TrialFacts, read

WarningCheck = Callable[[Record, TrialFacts], list[Violation]]

#: Every warning check by name, in the order they run. Modules that define one add it here.
WARNINGS: dict[str, WarningCheck] = {
    TOOL_ANNOTATIONS: tool_annotations,
}


def warnings_in(record: Record, facts: TrialFacts) -> list[Violation]:
    """Every warning the trial's record gives, in the order of :data:`WARNINGS`."""
    found: list[Violation] = []
    for check in WARNINGS.values():
        found += check(record, facts)
    return found


def warnings_of(events: Sequence[Event], facts: TrialFacts) -> list[Violation]:
    """:func:`warnings_in` of ``events`` read on their own (a trial is judged whole by
    :func:`harness.oracle.judge.judge`, which reads its history once)."""
    return warnings_in(read(events), facts)


def warning_json(found: Violation) -> dict[str, Any]:
    """A warning as results.json stores it: like a violation, keyed by ``warning``."""
    row = found.to_json()
    return {"warning": row.pop("invariant"), **row}
