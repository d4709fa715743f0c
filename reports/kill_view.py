"""The selftest kill matrix as rows for rendering: mutants x scenarios.

A cell is ``killed`` when one of the mutant's killing trials belongs to that scenario,
``survived`` when the mutant ran there without being caught, ``None`` when it did not
run there at all (its trials there, if any, were skipped: a selftest stops a mutant once
it is caught). A trial's scenario is its ``scenario`` field, never read from its id
(a mutant's trial ids start with the mutant). A killing trial these results do not hold
is listed in its row, in no column.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from reports.model import MutantResult, Results, TrialRow

KillStatus = Literal["killed", "survived"]


@dataclass(frozen=True)
class KillLink:
    trial_id: str
    href: str | None


@dataclass(frozen=True)
class KillCell:
    scenario: str
    status: KillStatus | None
    links: tuple[KillLink, ...]


@dataclass(frozen=True)
class KillRow:
    mutant: MutantResult
    cells: tuple[KillCell, ...]
    links: tuple[KillLink, ...]


@dataclass(frozen=True)
class KillView:
    scenarios: tuple[str, ...]
    rows: tuple[KillRow, ...]
    killed: int
    total: int
    correct_trials: int | None
    correct_violations: int | None
    mode: str | None = None


def build_kill_view(results: Results, link: Callable[[TrialRow], str]) -> KillView | None:
    km = results.kill_matrix
    if km is None:
        return None
    by_id: dict[str, TrialRow] = {}
    for t in results.trials:
        by_id.setdefault(t.id, t)
    scenarios = tuple(dict.fromkeys(t.scenario for t in results.trials))
    rows = []
    for m in km.mutants:
        links = tuple(
            KillLink(i, link(by_id[i]) if i in by_id else None) for i in dict.fromkeys(m.by)
        )
        # A skipped trial (no Toxiproxy, or the mutant already killed) did not run there.
        ran = {t.scenario for t in results.trials if t.mutant == m.name and t.status != "skipped"}
        cells = []
        for scenario in scenarios:
            here = tuple(lk for lk in links if _scenario(by_id, lk.trial_id) == scenario)
            status: KillStatus | None = (
                "killed" if here else "survived" if scenario in ran else None
            )
            cells.append(KillCell(scenario, status, here))
        rows.append(KillRow(mutant=m, cells=tuple(cells), links=links))
    return KillView(
        scenarios=scenarios,
        rows=tuple(rows),
        killed=km.killed,
        total=len(km.mutants),
        correct_trials=km.correct_trials,
        correct_violations=km.correct_violations,
        mode=km.mode,
    )


def _scenario(by_id: dict[str, TrialRow], trial_id: str) -> str | None:
    trial = by_id.get(trial_id)
    return None if trial is None else trial.scenario
