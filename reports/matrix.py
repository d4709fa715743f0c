"""The crash-point coverage matrix: trials grouped into rows and columns, data only.

Rows are scenario + injection point; columns are provider kind x signal, plus ledger,
backend and mutant when the run used more than one of them (a column that never varies
would only add noise). A cell may hold several trials (repeated seeds); it shows the
worst status and the count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from harness.contract.vocabulary import PROVIDER_KINDS
from reports.model import CELL_STATUSES, SEVERITY, CellStatus, Results, TrialRow

PROVIDER_ORDER = PROVIDER_KINDS
SIGNAL_ORDER = ("SIGKILL", "SIGTERM", "SIGSTOP")
EXTRA_DIMENSIONS = ("ledger", "backend", "mutant")
NO_SIGNAL = "no signal"
#: The mutant column's value for the worker under test itself.
CORRECT = "correct"


@dataclass(frozen=True)
class Column:
    provider: str
    signal: str | None
    #: (dimension, value) for each extra dimension in use, e.g. (("ledger", "postgres"),).
    extra: tuple[tuple[str, str], ...] = ()
    #: The provider's kind, which orders the columns; ``provider`` is its label, the
    #: declared name with the kind when the target names its providers.
    kind: str = ""

    @property
    def signal_label(self) -> str:
        return self.signal or NO_SIGNAL

    @property
    def label(self) -> str:
        return " · ".join([self.provider, self.signal_label, *(v for _, v in self.extra)])


@dataclass(frozen=True)
class Cell:
    column: Column
    trials: tuple[TrialRow, ...]

    @property
    def status(self) -> CellStatus | None:
        """The worst status of the cell's trials; None for a cell the run did not have."""
        worst = self.worst
        return None if worst is None else worst.status

    @property
    def worst(self) -> TrialRow | None:
        """The trial the cell links to: the first one with the worst status."""
        if not self.trials:
            return None
        return max(self.trials, key=lambda t: SEVERITY[t.status])

    @property
    def counts(self) -> Mapping[CellStatus, int]:
        return _count(t.status for t in self.trials)


@dataclass(frozen=True)
class Row:
    scenario: str
    injection_point: str
    cells: tuple[Cell, ...]
    #: The scenario's story and its expected durable result, from its trials (the first
    #: trial that says; the correct worker's before a mutant's).
    description: str | None = None
    expected: str | None = None

    @property
    def status(self) -> CellStatus | None:
        present: list[CellStatus] = []
        for cell in self.cells:
            status = cell.status
            if status is not None:
                present.append(status)
        if not present:
            return None
        worst: CellStatus = max(present, key=SEVERITY.__getitem__)
        return worst


@dataclass(frozen=True)
class Matrix:
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    dimensions: tuple[str, ...]

    def cells(self) -> Iterable[Cell]:
        for row in self.rows:
            yield from (c for c in row.cells if c.status is not None)

    @property
    def cell_counts(self) -> Mapping[CellStatus, int]:
        """How many cells show each status (a cell counts once, by its worst trial)."""
        return _count(s for s in (c.status for c in self.cells()) if s is not None)

    @property
    def n_cells(self) -> int:
        return sum(1 for _ in self.cells())

    def under_test(self) -> Iterable[Cell]:
        """The cells coverage counts: the worker under test's. A selftest's mutant cells
        are there to be caught (the kill matrix counts them) and most are skipped once one
        is, so counted here they would only say how fast the mutants died."""
        for cell in self.cells():
            if dict(cell.column.extra).get("mutant", CORRECT) == CORRECT:
                yield cell

    @property
    def covered(self) -> tuple[int, int]:
        """(cells reached and held, cells) of the worker under test."""
        statuses = [c.status for c in self.under_test()]
        return sum(1 for s in statuses if s == "held"), len(statuses)

    @property
    def coverage(self) -> float:
        """Cells reached and held out of the worker under test's cells in the table (0.0
        for an empty table)."""
        held, n = self.covered
        return held / n if n else 0.0

    def column_counts(self, index: int) -> Mapping[CellStatus, int]:
        statuses = (row.cells[index].status for row in self.rows)
        return _count(s for s in statuses if s is not None)

    def providers(self) -> list[tuple[str, int]]:
        """(provider, number of adjacent columns) for the spanning header row."""
        spans: list[tuple[str, int]] = []
        for col in self.columns:
            if spans and spans[-1][0] == col.provider:
                spans[-1] = (col.provider, spans[-1][1] + 1)
            else:
                spans.append((col.provider, 1))
        return spans


def build_matrix(results: Results) -> Matrix:
    trials = results.trials
    dimensions = tuple(d for d in EXTRA_DIMENSIONS if len({_dim(t, d) for t in trials}) > 1)
    columns = sorted({_column(t, dimensions) for t in trials}, key=_column_order)
    row_keys: list[tuple[str, str]] = []
    grouped: dict[tuple[tuple[str, str], Column], list[TrialRow]] = {}
    for t in trials:
        # Rows keep the order the run met them: the injection table's order.
        rk = (t.scenario, t.injection_point)
        if rk not in row_keys:
            row_keys.append(rk)
        grouped.setdefault((rk, _column(t, dimensions)), []).append(t)
    rows = []
    for rk in row_keys:
        cells = tuple(Cell(col, tuple(grouped.get((rk, col), ()))) for col in columns)
        told = sorted((t for c in cells for t in c.trials), key=lambda t: t.mutant is not None)
        rows.append(
            Row(
                scenario=rk[0],
                injection_point=rk[1],
                cells=cells,
                description=next((t.description for t in told if t.description), None),
                expected=next((t.expected for t in told if t.expected), None),
            )
        )
    return Matrix(columns=tuple(columns), rows=tuple(rows), dimensions=dimensions)


def _dim(trial: TrialRow, dimension: str) -> str:
    value = getattr(trial, dimension)
    return CORRECT if value is None else str(value)


def _column(trial: TrialRow, dimensions: tuple[str, ...]) -> Column:
    return Column(
        provider=trial.provider_label,
        signal=trial.signal,
        extra=tuple((d, _dim(trial, d)) for d in dimensions),
        kind=trial.provider,
    )


def _column_order(col: Column) -> tuple[object, ...]:
    def rank(value: str | None, order: tuple[str, ...]) -> tuple[int, str]:
        if value in order:
            return (order.index(value), "")
        return (len(order) + (value is None), value or "")

    kind = col.kind or col.provider
    return (
        rank(kind, PROVIDER_ORDER),
        col.provider,
        rank(col.signal, SIGNAL_ORDER),
        col.extra,
    )


def _count(statuses: Iterable[CellStatus]) -> dict[CellStatus, int]:
    counts: dict[CellStatus, int] = dict.fromkeys(CELL_STATUSES, 0)
    for status in statuses:
        counts[status] += 1
    return counts
