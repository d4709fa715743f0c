"""--jobs auto: the width follows what a trial holds, bounded by the cells and the cap."""

from __future__ import annotations

import os

import pytest

from harness import run_width as jobs


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    sizes = {"memory": 24 << 30, "fds": 20_000, "ports": 28_232, "cpus": 8}
    monkeypatch.setattr(jobs, "_usable_cpus", lambda: sizes["cpus"])
    monkeypatch.setattr(jobs, "_available_memory_b", lambda: sizes["memory"])
    monkeypatch.setattr(jobs, "_open_file_limit", lambda: sizes["fds"])
    monkeypatch.setattr(jobs, "_local_ports", lambda: sizes["ports"])
    return sizes


def test_a_roomy_machine_runs_the_widest_default(machine: dict[str, int]) -> None:
    assert jobs.auto_jobs(59) == jobs.MAX_AUTO_JOBS


def test_never_more_trials_than_cells(machine: dict[str, int]) -> None:
    assert jobs.auto_jobs(3) == 3


def test_memory_bounds_the_width(machine: dict[str, int]) -> None:
    machine["memory"] = 4 * 2 * jobs.TRIAL_MEMORY_B["process"]
    assert jobs.auto_jobs(59) == 4


def test_a_container_counts_more_memory_than_a_process(machine: dict[str, int]) -> None:
    machine["memory"] = 8 * 2 * jobs.TRIAL_MEMORY_B["process"]
    assert jobs.auto_jobs(59, backend="docker") < jobs.auto_jobs(59, backend="process")


def test_descriptors_bound_the_width(machine: dict[str, int]) -> None:
    machine["fds"] = 1024
    assert jobs.auto_jobs(59) == 1024 // 2 // jobs.TRIAL_FDS


def test_ports_bound_the_width(machine: dict[str, int]) -> None:
    machine["ports"] = 5 * 4 * jobs.TRIAL_PORTS
    assert jobs.auto_jobs(59) == 5


def test_cpus_bound_the_width(machine: dict[str, int]) -> None:
    machine["cpus"] = 2
    assert jobs.auto_jobs(59) == 2 * jobs.TRIALS_PER_CPU


def test_the_usable_cpus_are_this_process_s_share() -> None:
    assert 1 <= jobs._usable_cpus() <= (os.cpu_count() or 1)


def test_at_least_one(machine: dict[str, int]) -> None:
    machine["memory"] = 0
    assert jobs.auto_jobs(59) == 1


def test_a_given_number_overrides_auto(machine: dict[str, int]) -> None:
    assert jobs.resolve_jobs(3, 59) == 3
    assert jobs.resolve_jobs(None, 59) == jobs.MAX_AUTO_JOBS
