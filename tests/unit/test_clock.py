"""The clock-skew plumbing: offsets as libfaketime reads them, and the skip when the
library cannot be had (the cells say why, never pass)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import faketime
from harness.drivers.clock import MIN_STEP_S, step_s
from harness.infra import RunInfra
from harness.plan import cells
from scenarios.table import BY_NAME


def test_offsets_are_written_whole_as_libfaketime_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "w1.faketime"
    faketime.set_offset(path, -12.5)
    assert path.read_text() == "-12.5\n"
    faketime.set_offset(path, 0.0)
    assert path.read_text() == "+0\n"
    assert not list(tmp_path.glob("*.tmp"))


def test_a_worker_gets_the_wall_clock_of_its_file_and_keeps_the_monotonic_one() -> None:
    env = faketime.worker_env(Path("/t/w1.faketime"), "/lib/libfaketime.so.1")
    assert env["LD_PRELOAD"] == "/lib/libfaketime.so.1"
    assert env["FAKETIME_TIMESTAMP_FILE"] == "/t/w1.faketime"
    assert env["FAKETIME_NO_CACHE"] == "1"  # a step is seen at once
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"  # the ledger's clock stays whole


def test_a_library_named_but_missing_is_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(faketime.LIB_VAR, str(tmp_path / "nope.so"))
    assert faketime.library() is None


def test_without_libfaketime_the_clock_cells_are_skipped_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(faketime, "unavailable", lambda: "libfaketime is not installed")
    infra = RunInfra(ledger="sqlite", backend="process", pg_dsn=None)
    infra.toxiproxy = object()
    every = cells()
    skipped = infra.skipped(every)
    skew = {c.id for c in every if c.scenario.name == "clock_skew"}
    assert skew
    assert set(skipped) == skew
    assert set(skipped.values()) == {"libfaketime is not installed"}


def test_the_step_is_more_than_a_lease_either_way() -> None:
    class _Cell:
        def __init__(self, point: str) -> None:
            self.point = point

    class _Config:
        lease_ttl_s = 0.6

    class _Trial:
        def __init__(self, point: str) -> None:
            self.cell = _Cell(point)
            self.config = _Config()

    behind = step_s(_Trial("worker_behind"))  # type: ignore[arg-type]
    ahead = step_s(_Trial("worker_ahead"))  # type: ignore[arg-type]
    assert behind == -ahead
    assert ahead >= MIN_STEP_S > 0.6
    assert set(BY_NAME["clock_skew"].points) == {"worker_behind", "worker_ahead"}
