"""Run a matrix of cells, one trial each (``harness.results`` writes them down).

Trials are independent: each has its own state directory, providers and workers (a
provider process may serve several trials in turn, wiped between them), so
``--jobs N`` runs them on a thread pool (``--shard i/n`` is chosen in ``harness.plan``).
Each trial is opened on the run's infrastructure (:meth:`RunInfra.run_trial`), the one
way every command opens one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness import applicable
from harness.contract.errors import Terminated
from harness.drivers import driver_for
from harness.infra import RunInfra
from harness.plan import Cell
from harness.run_width import resolve_jobs
from harness.targets.reference import reference_lease_s
from harness.trial_run import Driver, TrialResult, skipped_result, trial_seed

__all__ = [
    "Admission",
    "RunInterrupted",
    "RunSpec",
    "TrialSource",
    "run_cells",
    "run_one",
    "run_spec",
    "skipped_result",
]

Progress = Callable[[TrialResult], None]


class TrialSource(Protocol):
    """Where a run's trials come from: :class:`harness.infra.RunInfra` (tests give a
    fake). ``abort`` is set on Ctrl-C: the trials stop waiting and tear down."""

    abort: threading.Event

    def run_trial(self, cell: Cell, seed: int, driver: Driver) -> TrialResult: ...


class Admission(Protocol):
    """A run's say over which cells start, and when (``harness.kill_admission`` is one).

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
    #: Opens and plays each trial (the run's :class:`RunInfra`).
    trials: TrialSource
    target: dict[str, Any]
    command: str = "run"
    jobs: int = 1
    #: Reasons cells are skipped before they run (cell id -> reason), e.g. no Toxiproxy.
    skipped: dict[str, str] = field(default_factory=dict)
    #: Cells left out because they cannot apply to the target (cell id -> reason):
    #: never run, never counted as skipped (:mod:`harness.applicable`).
    not_applicable: dict[str, str] = field(default_factory=dict)
    replay_flags: Sequence[str] = ()
    #: The order cells start in and whether each still should (None: all, in order).
    gate: Admission | None = None

    @property
    def abort(self) -> threading.Event:
        return self.trials.abort


def run_spec(
    infra: RunInfra,
    cells: Sequence[Cell],
    *,
    seed: int,
    command: str,
    jobs: int | None,
    target: dict[str, Any],
) -> RunSpec:
    """The run of ``cells`` on ``infra``; ``jobs`` None is the default width
    (``harness.run_width``)."""
    cells, not_applicable = applicable.split(cells, infra.command)
    replay: list[str] = []
    if infra.config.lease_ttl_s != reference_lease_s(infra.backend_name):
        replay += ["--lease-ttl-s", str(infra.config.lease_ttl_s)]
    return RunSpec(
        cells=cells,
        seed=seed,
        trials=infra,
        target=target,
        command=command,
        jobs=resolve_jobs(jobs, len(cells), backend=infra.backend_name),
        skipped=infra.skipped(cells),
        not_applicable=not_applicable,
        replay_flags=replay,
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
    return spec.trials.run_trial(cell, seed, driver)


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
    # The abort belongs to this run: one set by an earlier run on the same
    # infrastructure does not stop this one.
    spec.abort.clear()
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
