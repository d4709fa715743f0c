"""A trial's waits are the pauses between its looks at the workers, never the looking."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import phases
from harness.plan import Cell
from harness.trial import QUIESCENCE_POLL_S, Trial, TrialConfig, quiescence
from scenarios.table import BY_NAME


class Clock:
    """``time.monotonic`` that moves only when the test says: no test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Pauses:
    """The run's abort: a pause passes its time on the clock at once, never interrupted."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.pauses: list[float] = []

    def wait(self, seconds: float) -> bool:
        self.pauses.append(seconds)
        self.clock.now += seconds
        return False

    def is_set(self) -> bool:
        return False


class Ledger:
    """A target whose jobs end after ``reads`` reads, each costing ``read_s`` of harness time."""

    def __init__(self, clock: Clock, *, reads: int, read_s: float) -> None:
        self.clock, self.left, self.read_s = clock, reads, read_s

    def quiescent(self, jobs: Any) -> bool:
        self.clock.now += self.read_s
        self.left -= 1
        return self.left <= 0


def quiet_trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ledger_reads: int) -> Trial:
    clock = Clock()
    monkeypatch.setattr(quiescence.time, "monotonic", clock)
    monkeypatch.setattr(phases.time, "monotonic", clock)
    cell = Cell(
        BY_NAME["crash_before_external_call"],
        "before_external_call",
        "idempotent",
        "SIGKILL",
        "sqlite",
        "process",
        None,
    )
    never: Any = None
    t = Trial(
        cell,
        seed=1,
        config=TrialConfig(workdir=tmp_path),
        make_backend=lambda history: never,
        make_target=lambda d: never,
        abort=Pauses(clock),  # type: ignore[arg-type]
    )
    t.target = Ledger(clock, reads=ledger_reads, read_s=0.004)  # type: ignore[assignment]
    monkeypatch.setattr(t, "nothing_in_flight", lambda: True)
    return t


def test_the_poll_intervals_are_waits_and_the_ledger_reads_are_overhead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = quiet_trial(tmp_path, monkeypatch, ledger_reads=3)
    assert t.wait_quiescent() is True
    assert t.abort.pauses == [QUIESCENCE_POLL_S, QUIESCENCE_POLL_S]  # type: ignore[attr-defined]
    assert t.waits_s == pytest.approx(2 * QUIESCENCE_POLL_S)
    timings = t.phases.as_timings()
    # The whole wait is the phase; its three reads are the harness's own time.
    assert timings["quiescence_s"] == pytest.approx(2 * QUIESCENCE_POLL_S + 3 * 0.004)


def test_quiescence_found_at_the_first_read_waits_for_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = quiet_trial(tmp_path, monkeypatch, ledger_reads=1)
    assert t.wait_quiescent() is True
    assert t.waits_s == 0.0
    assert t.phases.as_timings()["quiescence_s"] == pytest.approx(0.004)


class EndsAt:
    """A target whose jobs all end once the clock reaches ``t``."""

    def __init__(self, clock: Clock, t: float) -> None:
        self.clock, self.t = clock, t

    def quiescent(self, jobs: Any) -> bool:
        return self.clock.now >= self.t


class Starved:
    """``CpuWait``: the workers waited ``s`` seconds for a CPU."""

    def __init__(self, s: float) -> None:
        self.s = s

    def waited_s(self) -> float:
        return self.s


@pytest.mark.parametrize(
    ("waited_s", "quiescent"),
    [(0.0, False), (0.3, False), (0.6, True), (5.0, True)],
)
def test_the_bound_is_stretched_by_the_workers_wait_for_a_cpu_at_most_by_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, waited_s: float, quiescent: bool
) -> None:
    t = quiet_trial(tmp_path, monkeypatch, ledger_reads=1)
    start = quiescence.time.monotonic()
    # The jobs end half a second past a 1 s bound: in time only for workers that waited
    # that long for a CPU; a wait longer than the bound stretches it by the bound.
    t.target = EndsAt(t.abort.clock, start + 1.5)  # type: ignore[assignment,attr-defined]
    monkeypatch.setattr(quiescence, "CpuWait", lambda pids, from_birth: Starved(waited_s))
    assert t.wait_quiescent(timeout_s=1.0) is quiescent
    if not quiescent:
        assert t.quiet_deadline == pytest.approx(start + 1.0 + waited_s, abs=QUIESCENCE_POLL_S)


def test_a_bound_never_stretched_past_twice_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = quiet_trial(tmp_path, monkeypatch, ledger_reads=1)
    start = quiescence.time.monotonic()
    t.target = EndsAt(t.abort.clock, start + 2.5)  # type: ignore[assignment,attr-defined]
    monkeypatch.setattr(quiescence, "CpuWait", lambda pids, from_birth: Starved(60.0))
    assert t.wait_quiescent(timeout_s=1.0) is False
    assert t.quiet_deadline == pytest.approx(start + 2.0)
