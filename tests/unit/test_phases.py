"""Phase timings: every phase reported, time added where it was spent, no unknown names."""

from __future__ import annotations

import pytest

import harness.phases
from harness.phases import PHASES, Phases


def test_every_phase_is_reported_and_time_adds_up() -> None:
    phases = Phases()
    phases.add("spawn", 0.25)
    phases.add("spawn", 0.5)
    timings = phases.as_timings()
    assert set(timings) == {f"{p}_s" for p in PHASES}
    assert timings["spawn_s"] == 0.75
    assert timings["oracle_s"] == 0.0


def test_a_timed_block_counts_even_when_it_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([10.0, 12.5])
    monkeypatch.setattr(harness.phases.time, "monotonic", lambda: next(clock))
    phases = Phases()
    with pytest.raises(RuntimeError), phases.timed("oracle"):
        raise RuntimeError("boom")
    assert phases.as_timings()["oracle_s"] == 2.5


def test_an_unknown_phase_is_refused() -> None:
    with pytest.raises(KeyError, match="no phase"):
        Phases().add("lunch", 1.0)
