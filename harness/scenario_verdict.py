"""What the oracle decided about a custom scenario's trial (:mod:`harness.scenario_api`),
with what it was decided from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.contract.vocabulary import Verdict
from harness.explain import explain
from harness.oracle import Violation


@dataclass(frozen=True, repr=False)
class ScenarioVerdict:
    """What the oracle decided about a custom trial, with what it was decided from: the
    judgement a table cell's trial gets (:func:`harness.oracle.judge`), whole."""

    verdict: Verdict
    violations: tuple[Violation, ...]
    reason: str | None
    reached: bool
    #: The trial's history, as results.json keeps it; violations cite it by index.
    events: tuple[dict[str, Any], ...]
    name: str = "custom scenario"
    page: Path | None = None
    replay: str | None = None
    #: Invariant -> why it (or the part named) could not be judged.
    unjudged: Mapping[str, str] = field(default_factory=dict)
    #: Findings that break no invariant (harness.oracle.warn).
    warnings: tuple[Violation, ...] = ()
    #: One row per committed effect, and one per job left in needs_review.
    trace: tuple[dict[str, Any], ...] = ()
    review: tuple[dict[str, Any], ...] = ()

    @property
    def held(self) -> bool:
        return self.verdict == Verdict.HELD

    @property
    def invariants(self) -> list[str]:
        """The invariants violated, each once, in the order they were found."""
        return list(dict.fromkeys(v.invariant for v in self.violations))

    def assert_held(self) -> None:
        """Raise ``AssertionError`` with the whole story unless the trial held."""
        __tracebackhide__ = True  # pytest shows the test's line, not this one
        if not self.held:
            raise AssertionError(str(self))

    def __repr__(self) -> str:
        found = f": {', '.join(self.invariants)}" if self.violations else ""
        return f"<ScenarioVerdict {self.verdict}{found}>"

    def __str__(self) -> str:
        return explain(
            self.name,
            verdict=self.verdict,
            reason=self.reason,
            violations=self.violations,
            events=self.events,
            page=self.page,
            replay=self.replay,
        )
