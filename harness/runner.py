"""Run a matrix of cells, one trial each (``harness.results`` writes them down).

Trials are independent: each has its own state directory, providers and workers (a
provider process may serve several trials in turn, wiped between them), so
``--jobs N`` runs them on a thread pool (``--shard i/n`` is chosen in ``harness.plan``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.backends.base import Backend
from harness.contract.errors import Terminated, ToxiproxyUnavailable
from harness.drivers import driver_for
from harness.history import History
from harness.plan import Cell
from harness.target import TargetAdapter
from harness.trial import TrialConfig
from harness.verdict import TrialResult, run_trial, trial_seed
from harness.watchdog import Watchdog

if TYPE_CHECKING:
    from fake_providers import ProviderPool
    from harness.network.seam import NetworkSeam

Progress = Callable[[TrialResult], None]


class Gate(Protocol):
    """A run's say over which cells start, and when (``harness.killgate`` is one).

    ``admit`` and ``record`` are called on the trial threads, so an implementation
    guards its own state. ``record`` runs on the thread that ran the trial, before that
    thread takes another cell: what a result decides holds for the very next start.
    """

    def order(self, cells: Sequence[Cell], width: int) -> Sequence[Cell]:
        """The cells in the order they are to start, ``width`` at a time (results keep
        the run's own order)."""
        ...

    def admit(self, cell: Cell) -> str | None:
        """Just before ``cell`` starts: the reason to skip it, or None to run it."""
        ...

    def record(self, result: TrialResult) -> None:
        """A cell's result, as soon as it is known (skipped ones too)."""
        ...


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
    #: Cells left out because they cannot apply to the target (cell id -> reason):
    #: never run, never counted as skipped (:mod:`harness.applicable`).
    not_applicable: dict[str, str] = field(default_factory=dict)
    make_network: Callable[[Cell], NetworkSeam | None] | None = None
    replay_flags: Sequence[str] = ()
    watchdog: Watchdog | None = None
    #: The run's warm providers, leased to each trial and wiped between them (None:
    #: every trial starts its own).
    providers: ProviderPool | None = None
    #: Set on Ctrl-C: this run's trials stop waiting and tear down. One per run, so a
    #: later run in the same process starts clear.
    abort: threading.Event = field(default_factory=threading.Event)
    #: The order cells start in and whether each still should (None: all, in order).
    gate: Gate | None = None


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
    # First, and raising: a row no driver plays is an engine defect, never a skip.
    driver = driver_for(cell.scenario.name, cell.point)
    if cell.id in spec.skipped:
        return skipped_result(cell, seed, spec.skipped[cell.id])
    refused = spec.gate.admit(cell) if spec.gate is not None else None
    if refused is not None:
        return skipped_result(cell, seed, refused)
    try:
        network = spec.make_network(cell) if spec.make_network is not None else None
    except ToxiproxyUnavailable as exc:
        # The server went away mid-run and could not be had again: the cells still to
        # come are skipped with the reason, never inconclusive noise or a crashed run.
        return skipped_result(cell, seed, f"no Toxiproxy server: {exc}")
    try:
        result = run_trial(
            cell,
            driver,
            seed=seed,
            config=spec.config,
            make_backend=spec.make_backend,
            make_target=lambda d: spec.make_target(cell, d),
            network=network,
            watchdog=spec.watchdog,
            abort=spec.abort,
            provider_pool=spec.providers,
        )
        broken = network.failure() if network is not None else None
        if broken is not None:
            # Whatever the trial saw after its proxies vanished is the harness's doing.
            was = f"{result.verdict}: {result.reason}" if result.reason else result.verdict
            result = replace(
                result, verdict="inconclusive", violations=[], reason=f"{broken}; it ended {was}"
            )
        return result
    finally:
        if network is not None:
            network.close()


def _run_recorded(spec: RunSpec, cell: Cell) -> TrialResult:
    result = run_one(spec, cell)
    if spec.gate is not None:
        spec.gate.record(result)
    return result


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a run: the trials that finished, in the cells' order,
    so their report is written rather than lost with the rest."""

    def __init__(self, finished: list[TrialResult], *, signal_name: str) -> None:
        super().__init__(f"interrupted by {signal_name}")
        self.finished = finished
        self.signal_name = signal_name


def run_cells(spec: RunSpec, *, progress: Progress | None = None) -> list[TrialResult]:
    """Run every cell (the gate's order, if any; it may skip some); results come back in
    the cells' order whatever the pool did."""
    results: dict[str, TrialResult] = {}
    # The pool takes its queue first in, first out: the submission order is the start order.
    todo = spec.cells
    if spec.gate is not None:
        todo = spec.gate.order(spec.cells, max(1, spec.jobs))
        if sorted(c.id for c in todo) != sorted(c.id for c in spec.cells):
            raise ValueError("a gate's order must hold the run's cells, each once")
    try:
        if spec.jobs <= 1:
            for cell in todo:
                r = _run_recorded(spec, cell)
                results[cell.id] = r
                if progress:
                    progress(r)
            return [results[c.id] for c in spec.cells]
        _run_pooled(spec, todo, results, progress)
    except KeyboardInterrupt as stop:
        # The trial cut off mid-way is inconclusive noise; those that finished stand.
        finished = [results[c.id] for c in spec.cells if c.id in results]
        name = "SIGTERM" if isinstance(stop, Terminated) else "SIGINT"
        raise RunInterrupted(finished, signal_name=name) from None
    return [results[c.id] for c in spec.cells]


def _run_pooled(
    spec: RunSpec,
    todo: Sequence[Cell],
    results: dict[str, TrialResult],
    progress: Progress | None,
) -> None:
    pool = ThreadPoolExecutor(max_workers=spec.jobs, thread_name_prefix="trial")
    try:
        futures = {pool.submit(_run_recorded, spec, c): c for c in todo}
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
