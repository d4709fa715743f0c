"""One schedule as one real trial: a cell of its own, the schedule's player as its
driver, opened on the run's infrastructure like every trial
(:meth:`harness.infra.RunInfra.run_trial`), then the usual quiescence, drain and oracle."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.drivers.scheduled import schedule_driver
from harness.exploration.evaluation import Outcome
from harness.infra import RunInfra
from harness.plan import Cell
from harness.schedule import Schedule
from harness.trial_run import TrialResult
from scenarios.table import Scenario

#: The scenario name every schedule trial is filed under in results.json and the report.
SCENARIO = "explore"


def schedule_cell(
    schedule: Schedule,
    label: str,
    *,
    ledger: str = "sqlite",
    backend: str = "process",
    mutant: str | None = None,
    provider_name: str | None = None,
) -> Cell:
    """The cell a schedule's trial is filed under: point ``label`` (``s0007``)."""
    scenario = Scenario(
        SCENARIO,
        schedule.describe(),
        "every invariant holds",
        "as the schedule drives it",
        points=(label,),
        providers=(schedule.provider,),
    )
    return Cell(scenario, label, schedule.provider, None, ledger, backend, mutant, provider_name)


@dataclass
class ScheduleRunner:
    """Runs schedules on one run's infrastructure and keeps every trial it ran."""

    infra: RunInfra
    seed: int
    mutant: str | None = None
    #: A command target's declared providers ``(name, kind)``; None for the reference.
    declared: Sequence[tuple[str, str]] | None = None
    replay: str = ""
    results: list[TrialResult] = field(default_factory=list)
    trials: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, schedule: Schedule, label: str) -> Outcome:
        name = None
        if self.declared is not None:
            name = next(n for n, kind in self.declared if kind == schedule.provider)
        cell = schedule_cell(
            schedule,
            label,
            ledger=self.infra.ledger,
            backend=self.infra.backend_name,
            mutant=self.mutant,
            provider_name=name,
        )
        result = self.infra.run_trial(
            cell,
            zlib.crc32(f"{self.seed}:{label}".encode()),
            schedule_driver(schedule),
            network=any(f.action == "toxic" for f in schedule.faults),
        )
        trial = result.to_json(self.replay)
        trial["schedule"] = schedule.to_json()
        self.results.append(result)
        self.trials.append(trial)
        invariants = tuple(dict.fromkeys(v.invariant for v in result.violations))
        return Outcome(result.verdict, invariants, trial)
