"""One pytest item per matrix cell, and how a trial's verdict becomes the item's outcome.

An item's id is ``SCENARIO[POINT-PROVIDER-SIGNAL]`` (DESIGN "Names that checks rely on"),
under a collector named for the target (its configuration file, or
``crashpoint:reference``), so ``-k``, ``--lf``, ``-x``, xdist and ``--junitxml`` treat
cells like any other test: held passes, violated fails with the violations and their
evidence, skipped skips with the reason, inconclusive fails (or skips, when asked to).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest

from harness.contract.vocabulary import Verdict
from harness.explain import explain
from harness.plan import Cell
from harness.trial_run import TrialResult

NO_SIGNAL = "none"


def item_name(cell: Cell) -> str:
    """``scenario[point-provider-signal]``; the provider part is the provider's own
    name where the cell carries one (a command target's declared providers), else the
    kind."""
    provider = getattr(cell, "provider_name", None) or cell.provider
    return f"{cell.scenario.name}[{cell.point}-{provider}-{cell.signal or NO_SIGNAL}]"


class CellRunner(Protocol):
    """What an item needs of its session: a trial run, the page it will be drawn on,
    and what an inconclusive verdict means here."""

    inconclusive: str

    def run_cell(self, cell: Cell) -> tuple[TrialResult, str]:
        """Run ``cell``'s trial; its result and replay command."""
        ...

    def page_of(self, trial_id: str) -> Path: ...


class CellFailed(Exception):
    """A cell did not hold: the text is the whole failure, no traceback needed."""


class TargetNode(pytest.Collector):
    """The target whose matrix is collected (a file or the reference worker)."""

    def __init__(self, *, cells: Sequence[Cell], runner: CellRunner, **kw: Any) -> None:
        super().__init__(**kw)
        self.cells = cells
        self.runner = runner

    def collect(self) -> Iterable[pytest.Item | pytest.Collector]:
        # The id is given as a string, so pytest parses it as it parses the ids in its
        # cache: ``--lf`` then finds the cells that failed (pytest 9 keeps ids structured).
        return [
            CellItem.from_parent(
                self,
                name=item_name(c),
                nodeid=f"{self.nodeid}::{item_name(c)}",
                cell=c,
                runner=self.runner,
            )
            for c in self.cells
        ]


class CellItem(pytest.Item):
    """One matrix cell: one trial, judged by the oracle."""

    def __init__(self, *, cell: Cell, runner: CellRunner, **kw: Any) -> None:
        super().__init__(**kw)
        self.cell = cell
        self.runner = runner
        for word in (cell.scenario.name, cell.point, cell.provider, cell.signal or NO_SIGNAL):
            self.keywords[word] = True
        self.add_marker("crashpoint_cell")

    def runtest(self) -> None:
        result, replay = self.runner.run_cell(self.cell)
        outcome(
            result,
            title=self.name,
            page=self.runner.page_of(self.cell.id),
            replay=replay,
            inconclusive=self.runner.inconclusive,
        )

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str | Any:
        if isinstance(excinfo.value, CellFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path | str, int | None, str]:
        return self.path, None, self.name


def outcome(result: TrialResult, *, title: str, page: Path, replay: str, inconclusive: str) -> None:
    """Return for held; skip, or raise :class:`CellFailed` with the whole story."""
    verdict = Verdict(result.verdict)
    if verdict == Verdict.HELD:
        return
    if verdict == Verdict.SKIPPED:
        pytest.skip(result.reason or "skipped")
    if verdict == Verdict.INCONCLUSIVE and inconclusive == "skip":
        pytest.skip(f"inconclusive: {result.reason or 'no reason given'}")
    raise CellFailed(
        explain(
            title,
            verdict=verdict.value,
            reason=result.reason,
            violations=result.violations,
            events=result.events,
            page=page,
            replay=replay,
        )
    )
