"""The selftest kill matrix as rows for rendering: mutants x scenarios.

A cell is ``killed`` when one of the mutant's killing trials belongs to that scenario,
``survived`` when the mutant ran there without being caught, ``None`` when it did not
run there at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from reports.model import MutantResult, Results, Trial

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


def build_kill_view(results: Results, link: Callable[[Trial], str]) -> KillView | None:
    km = results.kill_matrix
    if km is None:
        return None
    by_id: dict[str, Trial] = {}
    for t in results.trials:
        by_id.setdefault(t.id, t)
    scenarios = list(dict.fromkeys(t.scenario for t in results.trials))

    def scenario_of(trial_id: str) -> str:
        # Killing trials may live in another shard's results; ids start with the scenario.
        trial = by_id.get(trial_id)
        return trial.scenario if trial is not None else trial_id.split(".", 1)[0]

    for m in km.mutants:
        for trial_id in m.by:
            if scenario_of(trial_id) not in scenarios:
                scenarios.append(scenario_of(trial_id))
    rows = []
    for m in km.mutants:
        links = tuple(
            KillLink(i, link(by_id[i]) if i in by_id else None) for i in dict.fromkeys(m.by)
        )
        ran = {t.scenario for t in results.trials if t.mutant == m.name}
        cells = []
        for scenario in scenarios:
            here = tuple(lk for lk in links if scenario_of(lk.trial_id) == scenario)
            status: KillStatus | None = (
                "killed" if here else "survived" if scenario in ran else None
            )
            cells.append(KillCell(scenario, status, here))
        rows.append(KillRow(mutant=m, cells=tuple(cells), links=links))
    return KillView(
        scenarios=tuple(scenarios),
        rows=tuple(rows),
        killed=km.killed,
        total=len(km.mutants),
        correct_trials=km.correct_trials,
        correct_violations=km.correct_violations,
    )
