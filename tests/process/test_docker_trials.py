"""Trials with workers in containers: kills through the engine, pauses through the freezer."""

from __future__ import annotations

import pytest
from trialkit import describe, effects, events, run_cell

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
