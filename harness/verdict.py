"""Running one trial to its verdict.

:func:`run_trial` wraps a scenario driver with setup, the time bound, the oracle and
teardown, and turns whatever happened into a :class:`TrialResult`: anything the harness
itself breaks on becomes ``inconclusive`` with the reason, never a pass.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.backends.base import Backend
from harness.contract.errors import CrashpointError, Inconclusive
from harness.history import History
from harness.oracle import LIVENESS, Violation, check
from harness.plan import Cell
from harness.target import TargetAdapter
from harness.trial import Trial, TrialConfig
from harness.watchdog import Watchdog


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

    def to_json(self, replay: str) -> dict[str, Any]:
        c = self.cell
        return {
            "id": c.id,
            "scenario": c.scenario.name,
            "injection_point": c.point,
            "provider": c.provider,
            "signal": c.signal,
            "backend": c.backend,
            "ledger": c.ledger,
            "mutant": c.mutant,
            "verdict": self.verdict,
            "reached": self.reached,
            "reason": self.reason,
            "violations": [v.to_json() for v in self.violations],
            "duration_s": round(self.duration_s, 4),
            "seed": self.seed,
            "replay": replay,
            "description": c.scenario.injection,
            "expected": f"{c.scenario.expected} -> {c.scenario.recovery}",
            "events": self.events,
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
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
    network: Any = None,
    watchdog: Watchdog | None = None,
    abort: threading.Event | None = None,
) -> TrialResult:
    """Run ``driver`` on a fresh trial of ``cell`` and judge it.

    The driver applies the scenario's faults and returns the jobs whose only safe end is
    needs_review. Anything the harness itself breaks on becomes an ``inconclusive``
    verdict with the reason, never a pass. ``abort`` is the run's: set, it ends the
    trial's waits.
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
    )
    violations: list[Violation] = []
    reason: str | None = None
    verdict = "inconclusive"
    worker_s = 0.0
    try:
        trial.setup()
        review = driver(trial)
        quiescent = trial.wait_quiescent()
        data = trial.observe(quiescent=quiescent, review_expected=review)
        violations = check(data)
        safety = [v for v in violations if v.invariant not in LIVENESS]
        if violations:
            verdict = "violated"
        elif not quiescent:
            reason = "no quiescence within the trial's bound"
        else:
            verdict = "held"
        if not quiescent and not safety:
            verdict, violations = "inconclusive", []
            reason = f"jobs did not all end within {config.quiescence_timeout_s:.0f} s"
    except Inconclusive as exc:
        reason = str(exc)
    except CrashpointError as exc:
        reason = f"{type(exc).__name__}: {exc}"
    except Exception as exc:
        reason = f"harness error: {type(exc).__name__}: {exc}"
        print(traceback.format_exc(), file=sys.stderr)
    finally:
        worker_s = sum(
            (h.exited_at or time.monotonic()) - h.started_at for h in trial.workers.values()
        )
        trial.teardown()
    duration = time.monotonic() - t0
    events = trial.history.to_json()
    for v in violations:
        v.evidence["events"] = evidence_events(events, v)
    return TrialResult(
        cell=cell,
        seed=seed,
        verdict=verdict,
        reached=trial.reached,
        reason=reason,
        violations=violations,
        duration_s=duration,
        events=events,
        timings={
            "worker_s": worker_s,
            "waits_s": trial.waits_s,
            "overhead_s": max(0.0, duration - trial.waits_s),
        },
    )


def evidence_events(events: list[dict[str, Any]], v: Violation) -> list[int]:
    """Indexes of the timeline events a violation's evidence speaks of."""
    arrivals = {a["id"] for a in v.evidence.get("arrivals", [])}
    arrivals |= {e["arrival_id"] for e in v.evidence.get("effects", [])}
    tokens = {(r.get("worker_id"), r.get("token")) for r in v.evidence.get("ledger", [])}
    out = []
    for i, e in enumerate(events):
        f = e["fields"]
        if (
            f.get("arrival") in arrivals
            or (
                e["kind"] in ("claim", "result_write")
                and (e["source"].removeprefix("worker:"), f.get("token")) in tokens
            )
            or (e["kind"] == "signal" and e["job"] in (None, v.job))
        ):
            out.append(i)
    return out


def trial_seed(run_seed: int, cell: Cell) -> int:
    """A cell's own seed, stable for a run seed: any trial replays from the run's seed."""
    return zlib.crc32(f"{run_seed}:{cell.id}".encode())
