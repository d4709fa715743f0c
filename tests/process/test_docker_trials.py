"""Trials with workers in containers: kills through the engine, pauses through the freezer."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from trialkit import describe, effects, events, run_cell

from harness.infra import RunInfra
from harness.plan import Cell
from harness.runner import run_one, run_spec
from harness.trial import TrialConfig
from harness.trial_run import TrialResult
from scenarios.table import BY_NAME

pytestmark = [pytest.mark.process, pytest.mark.docker]


@pytest.fixture(autouse=True)
def engine(pytestconfig: pytest.Config) -> None:
    from harness.pytest_plugin import missing

    try:
        import docker

        docker.from_env(timeout=5).ping()
    except Exception as exc:
        missing(pytestconfig, f"Docker engine ({exc}); run scripts/install-infra.sh docker")


def test_container_worker_killed_at_the_boundary_is_recovered() -> None:
    r = run_cell(
        "crash_after_external_success", "after_external_call", "plain", "SIGKILL", backend="docker"
    )
    assert r.verdict == "held", describe(r)
    assert r.reached
    assert events(r, "failpoint", point="after_external_call", held=True, source="worker:w1")
    assert events(r, "worker_exit", worker="w1", status="killed by SIGKILL"), describe(r)
    assert effects(r) == 1


def test_paused_container_is_fenced_and_its_mutant_caught() -> None:
    cell = ("lease_expiry_slow_worker", "after_external_call", "idempotent", "SIGSTOP")
    r = run_cell(*cell, backend="docker")
    assert r.verdict == "held", describe(r)
    late = events(r, "result_write", job="j-0001", token=1, source="worker:w1")
    assert late, describe(r)
    assert all(e["fields"]["accepted"] is False for e in late)
    bad = run_cell(*cell, backend="docker", mutant="no_cas_on_result")
    assert bad.verdict == "violated", describe(bad)
    assert "fenced_writes" in {v.invariant for v in bad.violations}


def test_two_trials_of_one_run_at_once_do_not_collide() -> None:
    """Concurrent trials share the run id and their worker names (w1, w2): their
    containers must not share a name, nor one trial's close reap the other's."""
    after, lease = BY_NAME["crash_after_external_success"], BY_NAME["lease_expiry_slow_worker"]
    cells = [
        Cell(after, "after_external_call", "plain", "SIGKILL", backend="docker"),
        Cell(lease, "after_external_call", "idempotent", "SIGSTOP", backend="docker"),
    ]
    with RunInfra.open(
        cells, ledger="sqlite", backend="docker", pg_dsn=None, config=TrialConfig()
    ) as infra:
        spec = run_spec(infra, cells, seed=11, command="test", jobs=2, target={"name": "ref"})
        start = threading.Barrier(len(cells))

        def trial(cell: Cell) -> TrialResult:
            start.wait()
            return run_one(spec, cell)

        with ThreadPoolExecutor(max_workers=len(cells)) as pool:
            results = list(pool.map(trial, cells))
    for r in results:
        assert r.verdict == "held", describe(r)
    starts = [e for r in results for e in events(r, "worker_start")]
    assert {e["fields"]["worker"] for e in starts} >= {"w1", "w2"}
    containers = [e["fields"]["container"] for e in starts]
    assert len(containers) == len(set(containers)) >= 4
