"""``crashpoint run --maxfail N`` (``-x``: 1): once N trials are violated, the cells not
yet started are skipped, as pytest stops a session at its Nth failure. The gate still
exits 1, so stopping early can only make it fail sooner, never pass; the skipped cells
say why in their reason."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from harness.contract.vocabulary import Verdict
from harness.plan import Cell
from harness.trial_run import TrialResult

#: The reason a cell left unstarted gives; the limit and the first failing trial follow.
STOPPED = "not started: --maxfail"


class StopAfterFailures:
    """A :class:`harness.runner.Admission` that skips every cell once ``limit`` trials
    were violated. Thread-safe: the pool's threads admit and record at once. Trials
    already running when the limit is reached finish and count as they end."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the failure limit must be at least 1, got {limit}")
        self.limit = limit
        self._lock = threading.Lock()
        self._failed: list[str] = []

    def order(self, cells: Sequence[Cell], width: int) -> Sequence[Cell]:
        return cells

    def admit(self, cell: Cell) -> str | None:
        with self._lock:
            if len(self._failed) < self.limit:
                return None
            first = self._failed[0]
        return f"{STOPPED} {self.limit} reached (first violated: {first})"

    def record(self, result: TrialResult) -> None:
        if result.verdict == Verdict.VIOLATED:
            with self._lock:
                self._failed.append(result.cell.id)
