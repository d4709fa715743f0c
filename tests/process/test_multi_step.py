"""Multi-step jobs, lost acknowledgements and forgotten keys, with real workers.

Each row holds for the correct reference worker and leaves the mark it must (the crash at
its step's boundary, the step the recovery resumed at, the redelivery taken up); each of
its mutants is caught in the cell its description names, by the invariant it predicts,
while the correct worker holds that same cell (so every test here can fail).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from clikit import ROOT, leftovers, results, run
from trialkit import describe, events, run_cell, writes

from harness.trial_run import TrialResult
from scenarios.mutants import MUTANTS
from scenarios.table import BY_NAME, step_points

pytestmark = pytest.mark.process

STEP_CELLS = [
    (point, provider)
    for point in BY_NAME["multi_step_job"].points
    for provider in ("idempotent", "plain", "unqueryable")
]


def at(r: TrialResult, provider: str, worker: str) -> list[dict[str, Any]]:
    """The writes for the first job that reached ``provider`` from ``worker``."""
    return [
        w
        for w in writes(r)
        if w["fields"]["provider"] == provider and w["fields"]["worker"] == worker
    ]


@pytest.mark.parametrize(("point", "provider"), STEP_CELLS)
def test_every_boundary_of_every_step_holds_for_the_reference(point: str, provider: str) -> None:
    r = run_cell("multi_step_job", point, provider, "SIGKILL")
    assert r.verdict == "held", describe(r)
    boundary, step = point.split("@")
    held = events(r, "failpoint", point=boundary, step=step, held=True, job="j-0001")
    assert held, describe(r)
    assert events(r, "worker_exit", worker="w1", status="killed by SIGKILL")


def test_a_crash_after_step_one_leads_to_step_two_only() -> None:
    r = run_cell("multi_step_job", "after_external_call@ticket", "plain", "SIGKILL")
    assert r.verdict == "held", describe(r)
    # The ticket was made by w1; its successor looked it up and sent only the notification.
    assert len(at(r, "svc", "w1")) == 1
    assert at(r, "svc", "w2") == [], describe(r)
    [notified] = at(r, "notify", "w2")
    looked = [
        e
        for e in events(r, "reconcile", job="j-0001")
        if e["source"] == "provider:svc" and e["fields"]["worker"] == "w2"
    ]
    assert looked, describe(r)
    assert looked[0]["t"] < notified["t"]


def test_a_step_recorded_done_is_never_looked_up_again() -> None:
    r = run_cell("multi_step_job", "after_local_write@ticket", "plain", "SIGKILL")
    assert r.verdict == "held", describe(r)
    assert at(r, "svc", "w2") == []
    assert len(at(r, "notify", "w2")) == 1
    assert not [e for e in events(r, "reconcile", job="j-0001") if e["source"] == "provider:svc"]


@pytest.mark.parametrize("provider", ["idempotent", "plain", "unqueryable"])
def test_a_job_delivered_again_after_it_completed_makes_no_second_effect(provider: str) -> None:
    r = run_cell("lost_acknowledgement", "redelivered_after_completion", provider)
    assert r.verdict == "held", describe(r)
    assert r.reached_by == "failpoint"
    # Taken up again (a second claim) and closed from the ledger: one write only.
    assert len(events(r, "claim", job="j-0001")) == 2, describe(r)
    assert len(writes(r)) == 1


def test_a_retry_after_the_provider_forgot_the_key_makes_no_second_effect() -> None:
    r = run_cell("key_retention", "redelivered_after_key_expiry", "idempotent")
    assert r.verdict == "held", describe(r)
    assert len(events(r, "claim", job="j-0001")) == 2, describe(r)
    assert len(writes(r)) == 1


@pytest.mark.parametrize(
    ("mutant", "scenario", "point", "provider"),
    [
        ("restart_from_step_one", "multi_step_job", "after_local_write@ticket", "idempotent"),
        ("step_key_per_attempt", "multi_step_job", "after_external_call@ticket", "idempotent"),
        ("provider_memory_only", "key_retention", "redelivered_after_key_expiry", "idempotent"),
        ("provider_memory_only", "lost_acknowledgement", "redelivered_after_completion", "plain"),
    ],
)
def test_each_new_mutant_is_caught_by_the_invariant_it_predicts(
    mutant: str, scenario: str, point: str, provider: str
) -> None:
    signal = "SIGKILL" if scenario == "multi_step_job" else None
    correct = run_cell(scenario, point, provider, signal)
    assert correct.verdict == "held", describe(correct)
    r = run_cell(scenario, point, provider, signal, mutant=mutant)
    assert r.verdict == "violated", describe(r)
    assert MUTANTS[mutant].invariant in {v.invariant for v in r.violations}, describe(r)


def test_restarting_from_step_one_sends_the_ticket_again() -> None:
    r = run_cell(
        "multi_step_job",
        "after_local_write@ticket",
        "idempotent",
        "SIGKILL",
        mutant="restart_from_step_one",
    )
    # Same key, so the provider replays it: only resumes_at_missing_step sees the bug.
    assert len(at(r, "svc", "w2")) == 1, describe(r)
    assert {v.invariant for v in r.violations} == {"resumes_at_missing_step"}


PYSTEPS = ROOT / "tests" / "process" / "workers" / "pysteps" / "crashpoint.toml"


def test_a_command_target_that_declares_steps_runs_the_new_rows(
    scratch: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = ["-c", str(PYSTEPS), "--out", str(out), "--seed", "5"]
    for name in ("multi_step_job", "lost_acknowledgement", "key_retention"):
        args += ["--scenario", name]
    done = run(args, scratch)
    assert done.returncode == 0, done.stderr
    assert leftovers(scratch) == []
    trials = results(out)["trials"]
    steps = [t for t in trials if t["scenario"] == "multi_step_job"]
    # Its own steps' boundaries, each one reached at that step.
    assert [t["injection_point"] for t in steps] == list(step_points(("ticket", "notify")))
    for t in trials:
        assert (t["verdict"], t["reached"], t["violations"]) == ("held", True, []), t["reason"]
    for t in steps:
        boundary, step = t["injection_point"].split("@")
        held = [e for e in t["events"] if e["kind"] == "failpoint" and e["fields"]["held"]]
        assert [(e["fields"]["point"], e["fields"].get("step")) for e in held] == [(boundary, step)]
        # Both steps took effect once, each at its own provider.
        commits = [
            e["source"] for e in t["events"] if e["kind"] == "commit" and e["job"] == "j-0001"
        ]
        assert sorted(commits) == ["provider:mailer", "provider:tickets"], t["id"]
    assert {t["scenario"] for t in trials} == {
        "multi_step_job",
        "lost_acknowledgement",
        "key_retention",
    }
