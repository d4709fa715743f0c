"""Exploration on Hypothesis: its engine draws the schedules, its database keeps what
failed, its shrinker makes a finding small; real trials (or, in tests, a fake runner)
decide each schedule.

Real timing makes a trial's verdict a sample, not a function of the schedule, and
Hypothesis needs a function: a schedule that fails once and passes when shrinking tries
it again would make it raise ``Flaky`` and lose the finding. So each schedule is decided
once, and remembered: the first run, and when it violated, reruns up to ``n`` until
``k`` of them violated (:class:`Confirm`). At least ``k`` of ``n``: failing, and
Hypothesis shrinks it. Fewer: *flaky*, kept with its evidence and reproduction rate,
and reported as not failing so the search goes on. A schedule that held once is not run
again (a pass is evidence of nothing in particular).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis.database import ExampleDatabase

from harness.contract.errors import ConfigError
from harness.contract.vocabulary import Verdict
from harness.exploration.strategy import Space, schedules
from harness.schedule import FaultStep, Schedule


@dataclass(frozen=True)
class Outcome:
    """One trial of one schedule: its verdict, the invariants it broke, its record."""

    verdict: str
    invariants: tuple[str, ...] = ()
    #: The trial as results.json keeps it (empty from a fake runner).
    trial: dict[str, Any] = field(default_factory=dict)


#: Runs one trial of a schedule; the label names the trial (``s0007``, ``s0007-r2``).
Runner = Callable[[Schedule, str], Outcome]


@dataclass(frozen=True)
class Confirm:
    """A schedule fails when at least ``k`` of up to ``n`` runs violate."""

    k: int = 2
    n: int = 3

    @classmethod
    def parse(cls, text: str) -> Confirm:
        try:
            k, n = (int(x) for x in text.split("/"))
        except ValueError:
            raise ConfigError(f"--confirm {text!r} must look like k/n, for example 2/3") from None
        if not 1 <= k <= n <= 20:
            raise ConfigError(f"--confirm {text!r}: need 1 <= k <= n <= 20")
        return cls(k, n)

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"


#: What a decided schedule is.
FAILING, FLAKY, HELD, INCONCLUSIVE, NOT_RUN = "failing", "flaky", "held", "inconclusive", "not run"


@dataclass
class Evaluation:
    """A schedule and what its runs said."""

    index: int
    schedule: Schedule
    #: ``generate`` (a fresh example) or ``shrink`` (a candidate smaller than a failure).
    phase: str
    confirm: Confirm
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def violated(self) -> int:
        return sum(o.verdict == Verdict.VIOLATED for o in self.outcomes)

    @property
    def status(self) -> str:
        if not self.outcomes:
            return NOT_RUN
        if self.violated >= self.confirm.k:
            return FAILING
        if self.violated:
            return FLAKY
        if all(o.verdict == Verdict.INCONCLUSIVE for o in self.outcomes):
            return INCONCLUSIVE
        return HELD

    @property
    def rate(self) -> str:
        return f"{self.violated}/{len(self.outcomes)}"

    @property
    def invariants(self) -> list[str]:
        return list(dict.fromkeys(i for o in self.outcomes for i in o.invariants))

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "phase": self.phase,
            "status": self.status,
            "reproduced": self.rate,
            "verdicts": [o.verdict for o in self.outcomes],
            "invariants": self.invariants,
            "trials": [o.trial.get("id") for o in self.outcomes if o.trial.get("id")],
            "size": {"faults": len(self.schedule.faults), "jobs": self.schedule.jobs},
            "describe": self.schedule.describe(),
            "schedule": self.schedule.to_json(),
        }


@dataclass
class Exploration:
    """What a search found: every schedule decided, the shrunk finding, the flaky ones."""

    mode: str
    evaluations: list[Evaluation]
    #: Generated examples decided before the first failure, that one included.
    examples_needed: int | None
    first_failure: Evaluation | None
    finding: Evaluation | None

    @property
    def flaky(self) -> list[Evaluation]:
        return [e for e in self.evaluations if e.status == FLAKY]

    @property
    def trials_run(self) -> int:
        return sum(len(e.outcomes) for e in self.evaluations)

    @property
    def trials_to_detection(self) -> int | None:
        """Trials run up to and including the first violation, reruns counted."""
        n = 0
        for e in self.evaluations:
            for o in e.outcomes:
                n += 1
                if o.verdict == Verdict.VIOLATED:
                    return n
        return None


class Explorer:
    """Searches a space of schedules against a runner, deciding each schedule once."""

    def __init__(
        self,
        run: Runner,
        space: Space,
        *,
        budget: int,
        seed: int,
        confirm: Confirm = Confirm(),
        shrink_budget: int = 60,
        database: ExampleDatabase | None = None,
        progress: Callable[[Evaluation], None] | None = None,
    ) -> None:
        self.run = run
        self.space = space
        self.budget = budget
        self.seed = seed
        self.confirm = confirm
        self.shrink_budget = shrink_budget
        self.database = database
        self.progress = progress
        self._memo: dict[str, Evaluation] = {}
        self.evaluations: list[Evaluation] = []
        self._first_failure: Evaluation | None = None
        self._shrink_trials = 0

    # -- deciding one schedule -----------------------------------------------------------

    def evaluate(self, schedule: Schedule) -> Evaluation:
        key = schedule.key()
        if key in self._memo:
            return self._memo[key]
        phase = "generate" if self._first_failure is None else "shrink"
        ev = Evaluation(len(self.evaluations) + 1, schedule, phase, self.confirm)
        self._memo[key] = ev
        self.evaluations.append(ev)
        if phase == "shrink" and self._shrink_trials >= self.shrink_budget:
            # Spent: Hypothesis sees a pass and stops trying; the record says "not run".
            self._report(ev)
            return ev
        for outcome in self._runs(ev):
            ev.outcomes.append(outcome)
            if phase == "shrink":
                self._shrink_trials += 1
        if ev.status == FAILING and self._first_failure is None:
            self._first_failure = ev
        self._report(ev)
        return ev

    def _runs(self, ev: Evaluation) -> Iterator[Outcome]:
        label = f"s{ev.index:04d}"
        first = self.run(ev.schedule, label)
        yield first
        if first.verdict != Verdict.VIOLATED:
            return
        violated, runs = 1, 1
        while violated < self.confirm.k and violated + (self.confirm.n - runs) >= self.confirm.k:
            runs += 1
            again = self.run(ev.schedule, f"{label}-r{runs}")
            violated += again.verdict == Verdict.VIOLATED
            yield again

    def _report(self, ev: Evaluation) -> None:
        if self.progress is not None:
            self.progress(ev)

    # -- the searches --------------------------------------------------------------------

    def explore(self) -> Exploration:
        """Hypothesis draws up to ``budget`` schedules and shrinks the first failure."""

        class Failing(Exception):
            def __init__(self, ev: Evaluation) -> None:
                super().__init__(ev.schedule.describe())
                self.evaluation = ev

        @settings(
            max_examples=self.budget,
            database=self.database,
            deadline=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
            phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
            report_multiple_bugs=False,
            print_blob=False,
            verbosity=Verbosity.quiet,
        )
        @seed(self.seed)
        @given(schedules(self.space))
        def probe(schedule: Schedule) -> None:
            ev = self.evaluate(schedule)
            if ev.status == FAILING:
                raise Failing(ev)

        # The smallest failure is chosen below, from every decided schedule.
        with contextlib.suppress(Failing):
            probe()
        return self._result("explore")

    def random_baseline(self) -> Exploration:
        """The chaos baseline: ``budget`` schedules of kills at uniformly random moments
        with random restarts, drawn from the seed alone; nothing is shrunk."""
        rng = random.Random(self.seed)
        for _ in range(self.budget):
            ev = self.evaluate(chaos_schedule(rng, self.space))
            if ev.status == FAILING:
                break
        return self._result("random")

    def _result(self, mode: str) -> Exploration:
        failing = [e for e in self.evaluations if e.status == FAILING]
        finding = min(failing, key=lambda e: (e.schedule.size, e.index)) if failing else None
        needed = None
        if self._first_failure is not None:
            needed = sum(
                1
                for e in self.evaluations
                if e.phase == "generate" and e.index <= self._first_failure.index
            )
        return Exploration(mode, list(self.evaluations), needed, self._first_failure, finding)


#: How long into a trial a random kill may land, in leases: past it, most jobs are done.
CHAOS_HORIZON_LEASES = 3.0


def chaos_schedule(rng: random.Random, space: Space) -> Schedule:
    """Kills at uniformly random moments after the workers start, each restarting the
    worker or not at random (one always comes back at the end, or no job could end)."""
    horizon = space.lease_ttl_s * CHAOS_HORIZON_LEASES
    moments = sorted(rng.uniform(0, horizon) for _ in range(rng.randint(1, space.max_faults)))
    faults = tuple(
        FaultStep(
            at="time",
            action="kill",
            after_s=round(t, 3),
            signal=rng.choice(("SIGKILL", "SIGTERM")),
            restart=rng.random() < 0.5,
        )
        for t in moments
    )
    return Schedule(
        provider=rng.choice(space.providers),
        faults=faults,
        jobs=rng.randint(1, space.max_jobs),
        workers=rng.randint(1, space.max_workers),
        target=space.target,
        mutant=space.mutant,
    )
