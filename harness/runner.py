"""Run a matrix of cells and turn the trials into ``results.json``.

Trials are independent: each has its own state directory, provider and workers, so
``--jobs N`` runs them on a thread pool and ``--shard i/n`` takes every n-th cell.
"""

from __future__ import annotations

import platform
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.backends.base import Backend
from harness.drivers import driver_for
from harness.history import History
from harness.plan import Cell
from harness.target import TargetAdapter
from harness.trial import TrialConfig
from harness.verdict import TrialResult, run_trial, trial_seed
from harness.watchdog import Watchdog

VERDICTS = ("held", "violated", "inconclusive", "skipped")
SCHEMA = "crashpoint.results/1"

Progress = Callable[[TrialResult], None]


@dataclass
class RunSpec:
    cells: Sequence[Cell]
    seed: int
    config: TrialConfig
    make_backend: Callable[[History], Backend]
    make_target: Callable[[Cell, Path], TargetAdapter]
    target: dict[str, Any]
    command: str = "run"
    jobs: int = 1
    #: Reasons cells are skipped before they run (cell id -> reason), e.g. no Toxiproxy.
    skipped: dict[str, str] = field(default_factory=dict)
    make_network: Callable[[Cell], Any] | None = None
    replay_flags: Sequence[str] = ()
    watchdog: Watchdog | None = None
    #: Set on Ctrl-C: this run's trials stop waiting and tear down. One per run, so a
    #: later run in the same process starts clear.
    abort: threading.Event = field(default_factory=threading.Event)


def skipped_result(cell: Cell, seed: int, reason: str) -> TrialResult:
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


def run_one(spec: RunSpec, cell: Cell) -> TrialResult:
    seed = trial_seed(spec.seed, cell)
    if cell.id in spec.skipped:
        return skipped_result(cell, seed, spec.skipped[cell.id])
    driver = driver_for(cell.scenario.name, cell.point)
    if driver is None:
        return skipped_result(cell, seed, f"no driver for {cell.scenario.name} at {cell.point}")
    network = spec.make_network(cell) if spec.make_network is not None else None
    try:
        return run_trial(
            cell,
            driver,
            seed=seed,
            config=spec.config,
            make_backend=spec.make_backend,
            make_target=lambda d: spec.make_target(cell, d),
            network=network,
            watchdog=spec.watchdog,
            abort=spec.abort,
        )
    finally:
        if network is not None:
            network.close()


def run_cells(spec: RunSpec, *, progress: Progress | None = None) -> list[TrialResult]:
    """Run every cell; results come back in the cells' order whatever the pool did."""
    results: dict[str, TrialResult] = {}
    if spec.jobs <= 1:
        for cell in spec.cells:
            r = run_one(spec, cell)
            results[cell.id] = r
            if progress:
                progress(r)
        return [results[c.id] for c in spec.cells]
    pool = ThreadPoolExecutor(max_workers=spec.jobs, thread_name_prefix="trial")
    try:
        futures = {pool.submit(run_one, spec, c): c for c in spec.cells}
        for fut in as_completed(futures):
            r = fut.result()
            results[futures[fut].id] = r
            if progress:
                progress(r)
    except BaseException:
        # Ctrl-C: queued trials never start, running ones stop waiting and tear down.
        spec.abort.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [results[c.id] for c in spec.cells]


def replay_command(spec: RunSpec, cell: Cell) -> str:
    parts = ["crashpoint", "run", *spec.replay_flags]
    if cell.mutant:
        parts += ["--mutant", cell.mutant]
    parts += ["--scenario", cell.scenario.name, "--point", cell.point]
    parts += ["--provider", cell.provider]
    if cell.signal:
        parts += ["--signal", cell.signal]
    parts += ["--ledger", cell.ledger, "--backend", cell.backend, "--seed", str(spec.seed)]
    return " ".join(parts)


def summarize(trials: Sequence[dict[str, Any]]) -> dict[str, int]:
    counts = dict.fromkeys(VERDICTS, 0)
    for t in trials:
        counts[t["verdict"]] += 1
    return {"total": len(trials), **counts}


def results_document(
    spec: RunSpec,
    results: Sequence[TrialResult],
    *,
    started: float,
    environment: dict[str, Any],
    run_id: str | None = None,
) -> dict[str, Any]:
    trials = [r.to_json(replay_command(spec, r.cell)) for r in results]
    finished = time.time()
    return {
        "schema": SCHEMA,
        "run_id": run_id or new_run_id(),
        "command": spec.command,
        "seed": spec.seed,
        "started_at": _iso(started),
        "finished_at": _iso(finished),
        "duration_s": round(finished - started, 3),
        "target": spec.target,
        "environment": environment,
        "trials": trials,
        "summary": summarize(trials),
    }


def exit_code(summary: dict[str, int], *, strict: bool) -> int:
    """0 all held; 1 a violation; 3 inconclusive (or, with --strict, skipped)."""
    if summary["violated"]:
        return 1
    if summary["inconclusive"] or (strict and summary["skipped"]):
        return 3
    return 0


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:4]


def base_environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "toxiproxy": None,
        "docker": None,
        "postgres": None,
    }


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
