"""The selftest's gate: the order a mutant's cells start in, the stop once it is caught,
and the runner consulting it (fake trials: no processes, no sockets, no sleeps)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from harness.kill_admission import STOPPED, StopWhenKilled, likeliest_first, start_order
from harness.killmatrix import kill_matrix
from harness.oracle.evidence import Violation
from harness.plan import Cell, cells
from harness.results import results_document
from harness.runner import RunSpec, run_cells
from harness.trial_run import TrialResult
from scenarios.mutants import MUTANTS
from scenarios.table import BY_NAME

ROWS = [BY_NAME[n] for n in ("crash_before_external_call", "crash_after_external_success")]
SIGNALS = ["SIGKILL"]


def plan(*mutants: str) -> list[Cell]:
    """The selftest's plan: the correct worker's cells, then each mutant's."""
    out = cells(ROWS, signals=SIGNALS)
    for name in mutants:
        out += cells(ROWS, signals=SIGNALS, mutant=name)
    return out


def result(cell: Cell, verdict: str, *invariants: str) -> TrialResult:
    return TrialResult(
        cell=cell,
        seed=1,
        verdict=verdict,
        reached=True,
        reason=None,
        violations=[Violation(invariant=i, job="j-0001", message=i) for i in invariants],
        duration_s=0.1,
        events=[],
    )


def test_a_mutants_exposing_scenario_and_own_provider_come_first() -> None:
    mutant = MUTANTS["key_persisted_after_call"]  # crash_after_external_success, plain
    own = cells(ROWS, signals=SIGNALS, mutant=mutant.name)
    ordered = likeliest_first(own, mutant)
    assert sorted(c.id for c in ordered) == sorted(c.id for c in own)
    first = ordered[0]
    assert (first.scenario.name, first.provider) == (mutant.exposed_by, mutant.provider)
    exposing = [c.scenario.name == mutant.exposed_by for c in ordered]
    assert exposing == sorted(exposing, reverse=True), "no other scenario before the exposing one"
    assert own[0].scenario.name != mutant.exposed_by, "the plan's own order differs"


def test_start_order_takes_each_mutant_in_turn_then_the_correct_worker() -> None:
    todo = plan("ack_before_effect", "key_persisted_after_call")
    correct = [c for c in todo if c.mutant is None]
    assert len(correct) == 6
    order = start_order(todo, MUTANTS, width=3)
    assert sorted(c.id for c in order) == sorted(c.id for c in todo)
    lanes = [c.mutant for c in order]
    ack, kpac = "ack_before_effect", "key_persisted_after_call"
    # Rounds of one cell per mutant, the width of the pool of correct cells between them.
    assert lanes[:10] == [ack, kpac, None, None, None] * 2
    assert set(lanes[10:]) == {ack, kpac}, "the correct worker's cells are used up"
    # Each mutant's turn starts with its likeliest killer.
    assert order[0].scenario.name == "crash_before_external_call"
    assert (order[1].scenario.name, order[1].provider) == ("crash_after_external_success", "plain")
    assert [c for c in order if c.mutant is None] == correct, "the correct worker keeps its order"


def test_start_order_without_mutants_is_the_correct_workers_plan() -> None:
    assert start_order(plan(), MUTANTS, width=2) == plan()


def test_a_mutant_caught_as_predicted_runs_no_more_cells() -> None:
    gate = StopWhenKilled(MUTANTS)
    todo = plan("fresh_key_per_attempt", "ack_before_effect")
    fresh = [c for c in todo if c.mutant == "fresh_key_per_attempt"]
    ack = next(c for c in todo if c.mutant == "ack_before_effect")
    correct = next(c for c in todo if c.mutant is None)
    assert gate.admit(fresh[0]) is None
    gate.record(result(fresh[0], "held"))
    assert gate.admit(fresh[1]) is None, "a held trial kills nothing"
    gate.record(result(fresh[0], "violated", "stable_key_and_payload"))
    assert gate.admit(fresh[1]) == STOPPED + fresh[0].id
    gate.record(result(fresh[1], "violated", "stable_key_and_payload"))
    assert gate.admit(fresh[2]) == STOPPED + fresh[0].id, "the first kill is the one named"
    assert gate.admit(ack) is None, "another mutant runs on"
    assert gate.admit(correct) is None
    gate.record(result(correct, "violated", "stable_key_and_payload"))
    assert gate.admit(correct) is None, "the correct worker is never held back"


def test_a_kill_by_another_invariant_keeps_the_mutant_running() -> None:
    # Stopping there could report "not caught as expected" where the full run would not.
    gate = StopWhenKilled(MUTANTS)
    first, second = cells(ROWS, signals=SIGNALS, mutant="fresh_key_per_attempt")[:2]
    gate.record(result(first, "violated", "no_duplicate_effect"))
    assert gate.admit(second) is None
    gate.record(result(first, "inconclusive"))
    assert gate.admit(second) is None


class _Fake:
    """Trials played without processes: each mutant's likeliest cell kills it by its
    predicted invariant; every other trial holds."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, cell: Cell, driver: object, **kw: Any) -> TrialResult:
        with self.lock:
            self.started.append(cell.id)
        m = MUTANTS.get(cell.mutant or "")
        if m is not None and (cell.scenario.name, cell.provider) == (m.exposed_by, m.provider):
            return result(cell, "violated", m.invariant)
        return result(cell, "held")


class _Trials:
    """A run's trial source whose trials are ``play(cell, driver)``: nothing starts."""

    def __init__(self, play: Callable[..., TrialResult] | None = None) -> None:
        self.play = play
        self.abort = threading.Event()

    def run_trial(self, cell: Cell, seed: int, driver: Any) -> TrialResult:
        if self.play is None:
            raise AssertionError("the fake trial starts nothing")
        return self.play(cell, driver)


def _spec(
    todo: Sequence[Cell],
    gate: StopWhenKilled,
    jobs: int,
    play: Callable[..., TrialResult] | None = None,
) -> RunSpec:
    return RunSpec(
        cells=todo,
        seed=1,
        trials=_Trials(play),
        target={"name": "reference"},
        jobs=jobs,
        gate=gate,
    )


class _Recorded(StopWhenKilled):
    """Says when a kill was recorded, so the pool's other thread can wait for it."""

    def __init__(self) -> None:
        super().__init__(MUTANTS)
        self.kills = threading.Event()

    def record(self, result: TrialResult) -> None:
        super().record(result)
        if result.verdict == "violated":
            self.kills.set()


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_runner_skips_a_killed_mutants_remaining_cells(
    jobs: int,
) -> None:
    gate = _Recorded()
    fake = _Fake()

    def play(cell: Cell, driver: object, **kw: Any) -> TrialResult:
        if cell.mutant is None and jobs > 1:
            # Two at once: the correct worker's first trial ends only after the mutant's
            # kill is recorded, so which cells follow it does not hang on thread timing.
            assert gate.kills.wait(timeout=30), "the mutant's trial never ended"
        return fake(cell, driver, **kw)

    todo = plan("fresh_key_per_attempt")
    progressed: list[str] = []
    results = run_cells(
        _spec(todo, gate, jobs, play), progress=lambda r: progressed.append(r.cell.id)
    )

    assert [r.cell.id for r in results] == [c.id for c in todo], "results keep the cells' order"
    assert sorted(progressed) == sorted(c.id for c in todo), "progress sees every cell"
    by_id = {r.cell.id: r for r in results}
    correct = [c.id for c in todo if c.mutant is None]
    assert all(by_id[i].verdict == "held" for i in correct), "the correct worker ran in full"
    (killer,) = [r.cell.id for r in results if r.verdict == "violated"]
    assert killer.startswith("fresh_key_per_attempt.crash_after_external_success.")
    assert sorted(fake.started) == sorted([*correct, killer]), "nothing ran after the kill"
    stopped = [r for r in results if r.verdict == "skipped"]
    assert len(stopped) == len(todo) - len(correct) - 1
    assert {r.reason for r in stopped} == {STOPPED + killer}


def test_without_a_gate_every_cell_runs() -> None:
    fake = _Fake()
    todo = plan("fresh_key_per_attempt")
    spec = _spec(todo, StopWhenKilled(MUTANTS), 1, fake)
    spec.gate = None
    results = run_cells(spec)
    assert fake.started == [c.id for c in todo]
    assert "skipped" not in {r.verdict for r in results}


def test_a_gate_that_loses_a_cell_is_refused() -> None:
    class Lossy(StopWhenKilled):
        def order(self, cells: Sequence[Cell], width: int) -> list[Cell]:
            return list(cells[1:])

    with pytest.raises(ValueError, match="each once"):
        run_cells(_spec(plan(), Lossy(MUTANTS), 1))


def test_kill_matrix_says_not_run_for_cells_stopped_after_the_kill() -> None:
    todo = plan("fresh_key_per_attempt")
    spec = _spec(todo, StopWhenKilled(MUTANTS), 1, _Fake())
    doc = results_document(spec, run_cells(spec), started=0.0, environment={})
    km = kill_matrix(doc["trials"], MUTANTS, mode="until_killed")
    assert km["mode"] == "until_killed"
    row = km["mutants"]["fresh_key_per_attempt"]
    assert row["killed"]
    assert row["caught_as_expected"]
    # Its cells before the exposing scenario were skipped, none of them ran.
    assert row["scenarios"] == {
        "crash_before_external_call": "not run",
        "crash_after_external_success": "killed",
    }
    assert row["not_run"] == row["trials"] - 1
    assert km["correct_worker"]["trials"] == len([c for c in todo if c.mutant is None])


def test_kill_matrix_a_scenario_that_ran_in_part_survived() -> None:
    def trial(scenario: str, verdict: str, reason: str | None = None) -> dict[str, Any]:
        return {
            "id": f"uncapped_retries.{scenario}.{verdict}",
            "mutant": "uncapped_retries",
            "scenario": scenario,
            "verdict": verdict,
            "reason": reason,
            "violations": [],
        }

    stopped = STOPPED + "uncapped_retries.x"
    trials = [
        trial("crash_before_external_call", "skipped", stopped),
        trial("crash_before_external_call", "held"),
        trial("simultaneous_trigger", "skipped", "no Toxiproxy server"),
    ]
    row = kill_matrix(trials, MUTANTS)["mutants"]["uncapped_retries"]
    assert row["scenarios"] == {
        "crash_before_external_call": "survived",
        "simultaneous_trigger": "skipped",  # skipped for another reason: not the gate's
    }
    assert row["not_run"] == 1
    with pytest.raises(ValueError, match="mode="):
        kill_matrix(trials, MUTANTS, mode="quick")
