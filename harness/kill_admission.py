"""The selftest's gate: each mutant's likeliest killers start first, and a mutant caught
by the invariant it predicts runs no more cells (as mutation testers stop a mutant's
tests at its first kill). The correct worker's cells are never held back.

A mutant killed only by some other invariant keeps running: ``killed`` and
``caught_as_expected`` then say what running every cell would have said, and only
``by``, ``invariants`` and the per-scenario cells stay partial.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from harness.contract.vocabulary import Verdict
from harness.plan import Cell
from harness.trial_run import TrialResult
from scenarios.mutants import Mutant

#: The reason a cell of a killed mutant is skipped; the killing trial's id follows it.
STOPPED = "mutant already killed by "


def likeliest_first(cells: Sequence[Cell], mutant: Mutant | None) -> list[Cell]:
    """A mutant's cells, its exposing scenario first and, within that, its own provider
    kind first; otherwise in the plan's order."""
    if mutant is None:
        return list(cells)
    return sorted(
        cells,
        key=lambda c: (c.scenario.name != mutant.exposed_by, c.provider != mutant.provider),
    )


def start_order(
    cells: Sequence[Cell], mutants: Mapping[str, Mutant], *, width: int = 1
) -> list[Cell]:
    """Rounds: each mutant's next likeliest cell, then ``width`` of the correct worker's.

    Every mutant's best chances come in the first rounds. With ``width`` trials at once,
    the correct worker's cells (which all run) between two rounds let a mutant's trial
    end, and its kill stop the rest, before its next cell comes up; once they are used
    up the rounds follow each other directly.
    """
    queues: dict[str | None, list[Cell]] = {None: []}
    for c in cells:
        queues.setdefault(c.mutant, []).append(c)
    correct = queues.pop(None)
    lanes = [likeliest_first(own, mutants.get(name or "")) for name, own in queues.items()]
    out: list[Cell] = []
    for i in range(max((len(lane) for lane in lanes), default=0)):
        out += [lane[i] for lane in lanes if i < len(lane)]
        out += correct[:width]
        del correct[:width]
    return out + correct


def caught_as_predicted(result: TrialResult, mutant: Mutant) -> bool:
    return result.verdict == Verdict.VIOLATED and any(
        v.invariant == mutant.invariant for v in result.violations
    )


class StopWhenKilled:
    """A :class:`harness.runner.Admission`: skip a mutant's cells once one caught it as
    predicted. Thread-safe: the pool's threads admit and record at once."""

    def __init__(self, mutants: Mapping[str, Mutant]) -> None:
        self._mutants = mutants
        self._lock = threading.Lock()
        #: mutant -> the id of the trial that first caught it by its invariant
        self._killed_by: dict[str, str] = {}

    def order(self, cells: Sequence[Cell], width: int) -> list[Cell]:
        return start_order(cells, self._mutants, width=width)

    def admit(self, cell: Cell) -> str | None:
        if cell.mutant is None:
            return None
        with self._lock:
            killer = self._killed_by.get(cell.mutant)
        return None if killer is None else STOPPED + killer

    def record(self, result: TrialResult) -> None:
        name = result.cell.mutant
        mutant = self._mutants.get(name or "")
        if name is None or mutant is None or not caught_as_predicted(result, mutant):
            return
        with self._lock:
            self._killed_by.setdefault(name, result.cell.id)


def stopped_after_kill(trial: Mapping[str, Any]) -> bool:
    """Whether a trial (as ``results.json`` holds it) was skipped by this gate."""
    reason = trial.get("reason") or ""
    return trial["verdict"] == Verdict.SKIPPED and reason.startswith(STOPPED)
