"""What a driver returns: the jobs whose only safe end is needs_review."""

from __future__ import annotations

from harness.trial import Trial

NONE: frozenset[str] = frozenset()


def review_if_unqueryable(trial: Trial, job: str) -> frozenset[str]:
    """Where the provider has no read path, an unknown write can only end in review."""
    if trial.cell.provider == "unqueryable" and trial.cell.scenario.unknown_write:
        return frozenset({job})
    return NONE
