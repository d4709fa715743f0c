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

A failure is one of a *kind*: the set of invariants it broke. One worker can have several
bugs, and each kind is shrunk and reported on its own (:meth:`Explorer.explore`). Hypothesis
can keep several bugs apart (``report_multiple_bugs``), but once one is found it generates
only a little longer (ten seconds, or twice the calls to the last new bug) before it
shrinks: against real trials of seconds each that is two or three more schedules, and the
rest of the budget is never drawn. So the search is driven in passes: the whole budget is
generated first with nothing raised, then each kind is shrunk by a pass of its own that
draws the same schedules again (the same seed; each one remembered, so no trial runs
again) up to that kind's first failure, and shrinks it, raising for that kind only.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterable, Iterator

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis.database import ExampleDatabase

from harness.contract.vocabulary import Verdict
from harness.exploration.evaluation import (
    FAILING,
    Confirm,
    Evaluation,
    Exploration,
    Finding,
    Kind,
    Outcome,
    Runner,
)
from harness.exploration.strategy import Space, schedules
from harness.schedule import FaultStep, Schedule

#: Where the database lists the kinds it keeps a finding for, one value per kind.
KINDS_KEY = b"crashpoint.kinds"


def _kind_key(kind: Kind) -> bytes:
    return ",".join(kind).encode()


class _KindDatabase(ExampleDatabase):
    """One kind's corner of the run's database: every key prefixed with the kind. A pass
    that shrinks one kind deletes whatever no longer fails *its* way, so each kind keeps its
    own last finding apart from the others."""

    def __init__(self, db: ExampleDatabase, kind: Kind) -> None:
        super().__init__()
        self._db = db
        self._prefix = _kind_key(kind) + b":"

    def save(self, key: bytes, value: bytes) -> None:
        self._db.save(self._prefix + key, value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self._db.fetch(self._prefix + key)

    def delete(self, key: bytes, value: bytes) -> None:
        self._db.delete(self._prefix + key, value)


class Explorer:
    """Searches a space of schedules against a runner, deciding each schedule once."""

    def __init__(
        self,
        run: Runner,
        space: Space,
        *,
        budget: int,
        seed: int,
        confirm: Confirm = Confirm(),  # noqa: B008 (frozen: one shared default is safe)
        shrink_budget: int = 60,
        database: ExampleDatabase | None = None,
        progress: Callable[[Evaluation], None] | None = None,
        on_shrink: Callable[[Kind, Evaluation], None] | None = None,
        first_only: bool = False,
    ) -> None:
        self.run = run
        self.space = space
        self.budget = budget
        self.seed = seed
        self.confirm = confirm
        self.shrink_budget = shrink_budget
        self.database = database
        self.progress = progress
        self.on_shrink = on_shrink
        #: Stop drawing at the first failure and shrink that one kind only: what measuring
        #: the examples to a first detection needs, without the rest of the budget.
        self.first_only = first_only
        self._memo: dict[str, Evaluation] = {}
        self.evaluations: list[Evaluation] = []
        self._first_failure: Evaluation | None = None
        #: ``generate`` while the budget is drawn, ``shrink`` in a kind's own pass.
        self._phase = "generate"
        #: In a kind's pass: whether the draw has come back to that kind's failure yet.
        self._reached = True
        self._shrink_trials = 0
        #: Schedules a kind's pass drew on its way back that the first draw never decided.
        self.diverged = 0

    # -- deciding one schedule -----------------------------------------------------------

    def _may_run(self) -> bool:
        return self._phase != "shrink" or self._shrink_trials < self.shrink_budget

    def evaluate(self, schedule: Schedule) -> Evaluation:
        key = schedule.key()
        ev = self._memo.get(key)
        if ev is not None and (ev.outcomes or not self._may_run()):
            return ev
        if ev is None:
            if not self._reached:
                # A kind's pass draws the budget again up to that kind's first failure, and
                # every schedule on the way was decided by the first draw. One that was not
                # means the draw went another way: not run, not kept (a pass to Hypothesis).
                self.diverged += 1
                return Evaluation(0, schedule, self._phase, self.confirm)
            ev = Evaluation(len(self.evaluations) + 1, schedule, self._phase, self.confirm)
            self._memo[key] = ev
            self.evaluations.append(ev)
        if not self._may_run():
            # Spent: Hypothesis sees a pass and stops trying; the record says "not run" (a
            # later kind's pass, with its own budget, may still run it).
            self._report(ev)
            return ev
        for outcome in self._runs(ev):
            ev.outcomes.append(outcome)
            if self._phase == "shrink":
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
        """Hypothesis draws ``budget`` schedules, then shrinks each kind of failure.

        1. The kinds the database keeps a finding for are tried first (Hypothesis's reuse).
        2. The budget is drawn whole; a failure raises nothing, so the draw goes on past it.
        3. Each kind first seen in that draw, in order, gets a pass of its own with its own
           ``shrink_budget``: the same seed draws the same schedules (all remembered) up to
           the kind's first failure, which raises for that kind only, and Hypothesis shrinks
           it. A failure of another kind is a pass there, so shrinking keeps to its kind.
        """
        if self.database is not None:
            for stored in self.database.fetch(KINDS_KEY):
                kind = tuple(k for k in stored.decode().split(",") if k)
                self._hypothesis(kind, (Phase.reuse,))
                if not any(e.status == FAILING and e.kind == kind for e in self.evaluations):
                    self.database.delete(KINDS_KEY, stored)
        self._hypothesis(None, (Phase.explicit, Phase.generate), stop=self.first_only)
        generated = self._by_kind(phase="generate")
        for kind, evaluations in generated.items():
            if self.on_shrink is not None:
                self.on_shrink(kind, evaluations[0])
            self._phase, self._reached, self._shrink_trials = "shrink", False, 0
            try:
                self._hypothesis(kind, (Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink))
            finally:
                self._phase, self._reached = "generate", True
            if self.database is not None:
                self.database.save(KINDS_KEY, _kind_key(kind))
        return self._result("explore")

    def _hypothesis(
        self, kind: Kind | None, phases: tuple[Phase, ...], *, stop: bool = False
    ) -> None:
        """One Hypothesis run over the space: raising for failures of ``kind`` only (for
        any failure with ``stop``, none otherwise), with that kind's corner of the database."""

        class Failing(Exception):
            def __init__(self, ev: Evaluation) -> None:
                super().__init__(ev.schedule.describe())
                self.evaluation = ev

        database = None
        if kind is not None and self.database is not None:
            database = _KindDatabase(self.database, kind)

        @settings(
            max_examples=self.budget,
            database=database,
            deadline=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
            phases=phases,
            report_multiple_bugs=False,
            print_blob=False,
            verbosity=Verbosity.quiet,
        )
        @seed(self.seed)
        @given(schedules(self.space))
        def probe(schedule: Schedule) -> None:
            ev = self.evaluate(schedule)
            if ev.status == FAILING and (stop or ev.kind == kind):
                self._reached = True
                raise Failing(ev)

        # The smallest failure of each kind is chosen below, from every decided schedule.
        with contextlib.suppress(Failing):
            probe()

    def random_baseline(self) -> Exploration:
        """The chaos baseline: ``budget`` schedules of kills at uniformly random moments
        with random restarts, drawn from the seed alone; nothing is shrunk, and the first
        failure ends it."""
        rng = random.Random(self.seed)
        for _ in range(self.budget):
            ev = self.evaluate(chaos_schedule(rng, self.space))
            if ev.status == FAILING:
                break
        return self._result("random")

    def _by_kind(self, phase: str | None = None) -> dict[Kind, list[Evaluation]]:
        """Failing schedules by kind, kinds in the order first seen (in ``phase`` if given)."""
        kinds: dict[Kind, list[Evaluation]] = {}
        for e in self.evaluations:
            if e.status == FAILING:
                kinds.setdefault(e.kind, []).append(e)
        if phase is not None:
            kinds = {k: evs for k, evs in kinds.items() if evs[0].phase == phase}
        return kinds

    def _needed(self, first: Evaluation) -> int | None:
        """Generated examples decided up to ``first``, that one included."""
        if first.phase != "generate":
            return None
        return sum(1 for e in self.evaluations if e.phase == "generate" and e.index <= first.index)

    def _result(self, mode: str) -> Exploration:
        findings = [
            Finding(
                kind,
                min(evs, key=lambda e: (e.schedule.size, e.index)),
                evs[0],
                self._needed(evs[0]),
            )
            for kind, evs in self._by_kind().items()
        ]
        first = self._first_failure
        needed = None if first is None else self._needed(first)
        return Exploration(mode, list(self.evaluations), needed, first, findings)


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
