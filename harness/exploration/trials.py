"""One schedule as one real trial: a cell of its own, the schedule's player as its
driver, then the usual quiescence, drain and oracle (:func:`harness.verdict.run_trial`)."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.contract.errors import ToxiproxyUnavailable
from harness.drivers.scheduled import schedule_driver
from harness.exploration.search import Outcome
from harness.infra import RunInfra
from harness.plan import Cell
from harness.schedule import Schedule
from harness.trial import TrialConfig
from harness.verdict import TrialResult, run_trial
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
    config: TrialConfig
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
        network = None
        if any(f.action == "toxic" for f in schedule.faults):
            from harness.scenario_api import trial_network

            with contextlib.suppress(ToxiproxyUnavailable):
                network = trial_network(self.infra, cell)
        try:
            result = run_trial(
                cell,
                schedule_driver(schedule),
                seed=zlib.crc32(f"{self.seed}:{label}".encode()),
                config=self.config,
                make_backend=self.infra.make_backend,
                make_target=lambda d: self.infra.make_target(cell, d),
                network=network,
                watchdog=self.infra.watchdog,
                provider_pool=self.infra.providers,
            )
        finally:
            if network is not None:
                network.close()
        trial = result.to_json(self.replay)
        trial["schedule"] = schedule.to_json()
        self.results.append(result)
        self.trials.append(trial)
        invariants = tuple(dict.fromkeys(v.invariant for v in result.violations))
        return Outcome(result.verdict, invariants, trial)
