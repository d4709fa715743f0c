"""A run's abort belongs to that run: a later run in the same process starts clear."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from harness.contract.errors import Inconclusive
from harness.plan import Cell
from harness.runner import RunSpec, run_cells
from harness.trial import Trial, TrialConfig
from scenarios.table import BY_NAME


def cells() -> list[Cell]:
    scenario = BY_NAME["crash_before_external_call"]
    return [
        Cell(scenario, "before_external_call", kind, "SIGKILL", "sqlite", "process", None)
        for kind in ("idempotent", "plain")
    ]


class Trials:
    """A run's trial source whose every cell is skipped: nothing is opened."""

    def __init__(self, tmp_path: Path) -> None:
        self.abort = threading.Event()
        self.config = TrialConfig(workdir=tmp_path)

    def run_trial(self, cell: Cell, seed: int, driver: Any) -> Any:
        pytest.fail("no trial runs: every cell is skipped")


def spec(tmp_path: Path, trials: Trials | None = None) -> RunSpec:
    todo = cells()
    return RunSpec(
        cells=todo,
        seed=1,
        trials=trials or Trials(tmp_path),
        target={"name": "reference"},
        jobs=2,
        # Skipped cells return at once: the pool runs without a process.
        skipped={c.id: "test" for c in todo},
    )


def trial(run: RunSpec, tmp_path: Path) -> Trial:
    never: Any = None
    return Trial(
        run.cells[0],
        seed=1,
        config=TrialConfig(workdir=tmp_path),
        make_backend=lambda history: never,
        make_target=lambda d: never,
        abort=run.abort,
    )


def interrupt(result: object) -> None:
    raise KeyboardInterrupt


def test_ctrl_c_aborts_its_own_run_only(tmp_path: Path) -> None:
    first = spec(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        run_cells(first, progress=interrupt)
    assert first.abort.is_set()
    with pytest.raises(Inconclusive, match="interrupted"):
        trial(first, tmp_path).sleep(0)

    later = spec(tmp_path)
    assert not later.abort.is_set()
    trial(later, tmp_path).sleep(0)  # a later run's trial waits as asked
    assert [r.verdict for r in run_cells(later)] == ["skipped", "skipped"]


def test_a_trial_without_a_run_has_an_abort_of_its_own(tmp_path: Path) -> None:
    run = spec(tmp_path)
    run.abort.set()
    never: Any = None
    alone = Trial(
        run.cells[0],
        seed=1,
        config=TrialConfig(workdir=tmp_path),
        make_backend=lambda history: never,
        make_target=lambda d: never,
    )
    alone.sleep(0)


def test_a_later_run_on_the_same_infrastructure_starts_clear(tmp_path: Path) -> None:
    trials = Trials(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        run_cells(spec(tmp_path, trials), progress=interrupt)
    assert trials.abort.is_set()
    assert [r.verdict for r in run_cells(spec(tmp_path, trials))] == ["skipped", "skipped"]
    assert not trials.abort.is_set()
