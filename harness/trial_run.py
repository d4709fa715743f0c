"""One opened trial, played to its result.

:func:`play` wraps a scenario driver with setup, the time bound, the oracle and
teardown, and turns whatever happened into a :class:`TrialResult`: anything the harness
itself breaks on becomes ``inconclusive`` with the reason, never a pass. Trials are
opened by :meth:`harness.infra.RunInfra.open_trial` (the one way to open one).
"""

from __future__ import annotations

import contextlib
import sys
import time
import traceback
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from harness.contract.errors import CrashpointError, Inconclusive
from harness.contract.vocabulary import Verdict
from harness.history import Event
from harness.landing import exercised
from harness.oracle import Judgement, Violation, judge, warning_json
from harness.oracle.stored import facts_to_json
from harness.plan import Cell
from harness.provider_crash import provider_crash
from harness.targets.base import CommandProcesses, quiet_window_s
from harness.trial import PROVIDER_NAME, Driver, Trial

__all__ = [
    "Driver",
    "TrialResult",
    "containment_of",
    "judge_trial",
    "play",
    "skipped_result",
    "trial_seed",
]


@dataclass
class TrialResult:
    cell: Cell
    seed: int
    verdict: str
    reached: bool
    reason: str | None
    violations: list[Violation]
    duration_s: float
    events: list[dict[str, Any]]
    timings: dict[str, float] = field(default_factory=dict)
    #: Invariant -> why it (or the part its reason names) could not be judged.
    unjudged: dict[str, str] = field(default_factory=dict)
    #: "failpoint" (reached exactly), "provider" (at a provider hold), or None.
    reached_by: str | None = None
    #: Findings that break no invariant (see harness.oracle.warn); they leave the verdict be.
    warnings: list[Violation] = field(default_factory=list)
    #: How the workers' trees were contained: "cgroup2", "process_group" or "container"
    #: (several, comma-joined, if the workers differed); None: no worker started.
    containment: str | None = None
    #: One row per committed effect: job, attempt, key, the provider's record id.
    trace: list[dict[str, Any]] = field(default_factory=list)
    #: One row per job that ended in needs_review, with the evidence a reviewer needs.
    review: list[dict[str, Any]] = field(default_factory=list)
    #: The oracle's facts as stored (``harness.oracle.stored``): a stored history can be
    #: judged again without rerunning it (``crashpoint recheck``). None: never judged.
    facts: dict[str, Any] | None = None
    #: Where the trial's state directory was kept (``--keep-state``, a trial that did not
    #: hold); None: removed with the trial.
    state_dir: str | None = None
    #: What the cell exercised, in one sentence (:mod:`harness.landing`); None: nothing.
    exercised: str | None = None

    def to_json(self, replay: str) -> dict[str, Any]:
        c = self.cell
        return {
            "id": c.id,
            "scenario": c.scenario.name,
            "injection_point": c.point,
            "provider": c.provider,
            "provider_name": c.provider_name or PROVIDER_NAME,
            "signal": c.signal,
            "backend": c.backend,
            "ledger": c.ledger,
            "mutant": c.mutant,
            "verdict": self.verdict,
            "reached": self.reached,
            "reached_by": self.reached_by,
            "exercised": self.exercised,
            "containment": self.containment,
            "reason": self.reason,
            "unjudged": dict(self.unjudged),
            "violations": [v.to_json() for v in self.violations],
            "warnings": [warning_json(w) for w in self.warnings],
            "trace": self.trace,
            "review": self.review,
            "duration_s": round(self.duration_s, 4),
            "seed": self.seed,
            "replay": replay,
            "description": c.scenario.injection,
            "expected": f"{c.scenario.expected} -> {c.scenario.recovery}",
            "events": self.events,
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
            "facts": self.facts,
            "state_dir": self.state_dir,
        }


def skipped_result(cell: Cell, seed: int, reason: str) -> TrialResult:
    """A trial that never ran, and why (a prerequisite missing, a gate's refusal)."""
    return TrialResult(
        cell=cell,
        seed=seed,
        verdict="skipped",
        reached=False,
        reason=reason,
        violations=[],
        duration_s=0.0,
        events=[],
    )


def play(
    trial: Trial,
    driver: Driver,
    *,
    infrastructure: Callable[[Trial], str | None] | None = None,
) -> TrialResult:
    """Run ``driver`` on ``trial`` (fresh, not yet set up), judge it and tear it down.

    The driver applies the scenario's faults and returns the jobs whose only safe end is
    needs_review. The workers are stopped before the oracle reads the history, so the
    events it judges are the whole trial, and exactly the list the result keeps.
    Anything the harness itself breaks on becomes an ``inconclusive`` verdict with the
    reason, never a pass. ``infrastructure`` says what of the run's own servers failed
    under the trial (None: nothing): an error such a failure explains is not the
    harness's bug, and prints no traceback.
    """
    t0 = time.monotonic()
    judged = Judgement(Verdict.INCONCLUSIVE)
    events: list[Event] | None = None
    stored: dict[str, Any] | None = None
    try:
        trial.setup()
        review = driver(trial)
        events, judged, stored = judge_trial(trial, review)
    except Exception as exc:
        explained = None if infrastructure is None else (lambda: infrastructure(trial))
        judged = Judgement(Verdict.INCONCLUSIVE, reason=broken_because(exc, explained))
    finally:
        trial.stop()
        # Before the last records are read: a dead provider is restarted on its log.
        crashed = provider_crash(trial)
        if crashed is not None:
            judged = replace(
                judged, verdict=Verdict.INCONCLUSIVE, violations=(), unjudged={}, reason=crashed
            )
            events = None  # read again below, from the restarted provider's log
            # Its records were not whole when judged: recheck must keep it, not judge it.
            stored = None
        worker_s = workers_time_s(trial)
        if events is None:
            events = recorded_so_far(trial)
        trial.keep_state(judged.verdict.value)
        trial.teardown()
    return _result(trial, judged, events, stored, t0=t0, worker_s=worker_s)


def judge_trial(
    trial: Trial, review: Iterable[str], *, timeout_s: float | None = None
) -> tuple[list[Event], Judgement, dict[str, Any]]:
    """Wait for quiescence (``timeout_s``, else the settings' bound), stop every worker
    and judge the whole history: the events judged, the judgement, the facts as stored
    (for ``crashpoint recheck``). ``review`` names the jobs whose only safe end is
    needs_review."""
    config = trial.config
    quiescent = trial.wait_quiescent(timeout_s=timeout_s)
    events = trial.record()
    facts = trial.facts(quiescent=quiescent, review_expected=frozenset(review))
    stored = facts_to_json(facts, t0=trial.history.t0)
    with trial.phases.timed("oracle"):
        judged = judge(
            events,
            facts,
            bound_s=timeout_s or config.quiescence_timeout_s,
            quiet_s=quiet_window_s(config.lease_ttl_s),
        )
    return events, judged, stored


def broken_because(exc: Exception, explained: Callable[[], str | None] | None = None) -> str:
    """Why a trial the harness broke on is inconclusive, from what it raised.

    An unexpected error prints its traceback, unless ``explained`` names a failure of the
    run's infrastructure: a PostgreSQL restart cuts the harness's own connections
    wherever it was (a consumer's ledger set-up, say), and the verdict names the restart.
    """
    if isinstance(exc, Inconclusive):
        return str(exc)
    if isinstance(exc, CrashpointError):
        return f"{type(exc).__name__}: {exc}"
    if explained is None or explained() is None:
        print(traceback.format_exc(), file=sys.stderr)
    return f"harness error: {type(exc).__name__}: {exc}"


def recorded_so_far(trial: Trial) -> list[Event]:
    """Not judged: what the trial recorded, for the report, as far as it still can."""
    trial.stop()
    with contextlib.suppress(Exception):
        trial.observer.settle()
    return trial.history.events()


def startups(trial: Trial) -> dict[str, float]:
    """How long the target's served commands took to start, when it has any."""
    if isinstance(trial.target, CommandProcesses):
        return trial.target.command_startups()
    return {}


def workers_time_s(trial: Trial) -> float:
    """The seconds the trial's workers were alive, summed, up to the trial's stop."""
    stopped = trial.stopped_at or time.monotonic()
    return sum(min(h.exited_at or stopped, stopped) - h.started_at for h in trial.workers.values())


def _result(
    trial: Trial,
    judged: Judgement,
    events: list[Event],
    stored: dict[str, Any] | None,
    *,
    t0: float,
    worker_s: float,
) -> TrialResult:
    duration = time.monotonic() - t0
    verdict = judged.verdict
    return TrialResult(
        cell=trial.cell,
        seed=trial.seed,
        verdict=verdict.value,
        reached=trial.reached,
        reason=judged.reason,
        violations=list(judged.violations),
        duration_s=duration,
        events=[e.to_json(t0=trial.history.t0) for e in events],
        timings={
            "worker_s": worker_s,
            "waits_s": trial.waits_s,
            "overhead_s": max(0.0, duration - trial.waits_s),
            **trial.phases.as_timings(),
            **startups(trial),
        },
        unjudged=dict(judged.unjudged),
        reached_by=trial.reached_by if trial.reached else None,
        warnings=list(judged.warnings) if verdict != Verdict.INCONCLUSIVE else [],
        containment=containment_of(events),
        trace=list(judged.trace),
        review=list(judged.review),
        facts=stored,
        state_dir=str(trial.kept_state) if trial.kept_state is not None else None,
        exercised=exercised_by(trial, events),
    )


def exercised_by(trial: Trial, events: list[Event]) -> str:
    """What the trial exercised: its driver's word, else how its injection was reached."""
    if not trial.reached:
        return trial.exercised or f"not exercised: {trial.cell.point} was not reached"
    return exercised(
        events,
        point=trial.cell.point,
        provider=trial.provider_name,
        # A multi-step job's hits are at every step by design: no landing to question.
        providers=0 if trial.steps else len(trial.providers),
        reached_by=trial.reached_by,
        said=trial.exercised,
    )


def containment_of(events: list[Event]) -> str | None:
    """What the workers' start events say contained them, in start order."""
    seen = [e.fields.get("containment") for e in events if e.kind == "worker_start"]
    kinds = list(dict.fromkeys(str(k) for k in seen if k))
    return ",".join(kinds) or None


def trial_seed(run_seed: int, cell: Cell) -> int:
    """A cell's own seed, stable for a run seed: any trial replays from the run's seed."""
    return zlib.crc32(f"{run_seed}:{cell.id}".encode())
