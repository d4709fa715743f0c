"""Running one trial to its verdict.

:func:`run_trial` wraps a scenario driver with setup, the time bound, the oracle and
teardown, and turns whatever happened into a :class:`TrialResult`: anything the harness
itself breaks on becomes ``inconclusive`` with the reason, never a pass.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.backends.base import Backend
from harness.contract.errors import CrashpointError, Inconclusive
from harness.contract.vocabulary import Verdict
from harness.history import Event, History
from harness.oracle import Violation, judge, warning_json
from harness.oracle.stored import facts_to_json
from harness.plan import Cell
from harness.provider_crash import provider_crash
from harness.target import TargetAdapter, quiet_window_s
from harness.trial import PROVIDER_NAME, Trial, TrialConfig
from harness.watchdog import Watchdog

if TYPE_CHECKING:
    from fake_providers import ProviderPool
    from harness.network.seam import NetworkSeam


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
        }


Driver = Callable[[Trial], frozenset[str]]


def run_trial(
    cell: Cell,
    driver: Driver,
    *,
    seed: int,
    config: TrialConfig,
    make_backend: Callable[[History], Backend],
    make_target: Callable[[Path], TargetAdapter],
    network: NetworkSeam | None = None,
    watchdog: Watchdog | None = None,
    abort: threading.Event | None = None,
    provider_pool: ProviderPool | None = None,
) -> TrialResult:
    """Run ``driver`` on a fresh trial of ``cell`` and judge it.

    The driver applies the scenario's faults and returns the jobs whose only safe end is
    needs_review. The workers are stopped before the oracle reads the history, so the
    events it judges are the whole trial, and exactly the list the result keeps.
    Anything the harness itself breaks on becomes an ``inconclusive`` verdict with the
    reason, never a pass. ``abort`` is the run's: set, it ends the trial's waits.
    ``provider_pool`` is the run's warm providers (None: each trial starts its own).
    """
    t0 = time.monotonic()
    trial = Trial(
        cell,
        seed=seed,
        config=config,
        make_backend=make_backend,
        make_target=make_target,
        network=network,
        watchdog=watchdog,
        abort=abort,
        provider_pool=provider_pool,
    )
    violations: list[Violation] = []
    warnings: list[Violation] = []
    trace: list[dict[str, Any]] = []
    review_desk: list[dict[str, Any]] = []
    reason: str | None = None
    verdict = Verdict.INCONCLUSIVE.value
    events: list[Event] | None = None
    notes: dict[str, str] = {}
    stored_facts: dict[str, Any] | None = None
    try:
        trial.setup()
        review = driver(trial)
        quiescent = trial.wait_quiescent()
        events = trial.record()
        facts = trial.facts(quiescent=quiescent, review_expected=review)
        stored_facts = facts_to_json(facts, t0=trial.history.t0)
        with trial.phases.timed("oracle"):
            judged = judge(
                events,
                facts,
                bound_s=config.quiescence_timeout_s,
                quiet_s=quiet_window_s(config.lease_ttl_s),
            )
        verdict, reason = judged.verdict.value, judged.reason
        violations, warnings = list(judged.violations), list(judged.warnings)
        notes, trace, review_desk = dict(judged.unjudged), list(judged.trace), list(judged.review)
    except Inconclusive as exc:
        reason = str(exc)
    except CrashpointError as exc:
        reason = f"{type(exc).__name__}: {exc}"
    except Exception as exc:
        reason = f"harness error: {type(exc).__name__}: {exc}"
        print(traceback.format_exc(), file=sys.stderr)
    finally:
        trial.stop()
        # Before the last records are read: a dead provider is restarted on its log.
        crashed = provider_crash(trial)
        if crashed is not None:
            verdict, violations, notes, reason = Verdict.INCONCLUSIVE.value, [], {}, crashed
            events = None  # read again below, from the restarted provider's log
            # Its records were not whole when judged: recheck must keep it, not judge it.
            stored_facts = None
        stopped = trial.stopped_at or time.monotonic()
        worker_s = sum(
            min(h.exited_at or stopped, stopped) - h.started_at for h in trial.workers.values()
        )
        if events is None:
            # Not judged: keep what the trial recorded for the report, as far as it can.
            with contextlib.suppress(Exception):
                trial.observer.settle()
            events = trial.history.events()
        trial.teardown()
    duration = time.monotonic() - t0
    return TrialResult(
        cell=cell,
        seed=seed,
        verdict=verdict,
        reached=trial.reached,
        reason=reason,
        violations=violations,
        duration_s=duration,
        events=[e.to_json(t0=trial.history.t0) for e in events],
        timings={
            "worker_s": worker_s,
            "waits_s": trial.waits_s,
            "overhead_s": max(0.0, duration - trial.waits_s),
            **trial.phases.as_timings(),
        },
        unjudged=notes,
        reached_by=trial.reached_by if trial.reached else None,
        warnings=warnings if verdict != Verdict.INCONCLUSIVE else [],
        containment=containment_of(events),
        trace=trace,
        review=review_desk,
        facts=stored_facts,
    )


def containment_of(events: list[Event]) -> str | None:
    """What the workers' start events say contained them, in start order."""
    seen = [e.fields.get("containment") for e in events if e.kind == "worker_start"]
    kinds = list(dict.fromkeys(str(k) for k in seen if k))
    return ",".join(kinds) or None


def trial_seed(run_seed: int, cell: Cell) -> int:
    """A cell's own seed, stable for a run seed: any trial replays from the run's seed."""
    return zlib.crc32(f"{run_seed}:{cell.id}".encode())
