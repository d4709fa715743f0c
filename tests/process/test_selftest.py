"""The harness catches every mutant it claims to, by the invariant the mutant predicts,
and the correct worker holds the very same cells (so no catch is a false positive).
``crashpoint selftest`` stops a mutant once it is caught; ``--full`` runs every cell."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from clikit import results, run
from trialkit import describe, run_cell

from harness.contract.vocabulary import ExitCode
from scenarios.mutants import MUTANTS

pytestmark = pytest.mark.process

#: mutant -> the cell that kills it (scenario, point, provider, signal)
KILLING_CELLS = {
    "ack_before_effect": (
        "crash_before_external_call",
        "before_external_call",
        "idempotent",
        "SIGKILL",
    ),
    "conflict_409_new_key": (
        "duplicate_delivery",
        "redelivered_while_in_flight",
        "idempotent",
        None,
    ),
    "fresh_key_per_attempt": (
        "crash_after_external_success",
        "after_external_call",
        "idempotent",
        "SIGKILL",
    ),
    "key_persisted_after_call": (
        "crash_after_external_success",
        "after_external_call",
        "plain",
        "SIGKILL",
    ),
    "lease_checked_only_at_claim": (
        "lease_expiry_slow_worker",
        "before_external_call",
        "plain",
        "SIGSTOP",
    ),
    "lookup_error_is_not_found": (
        "provider_down_during_reconcile",
        "provider_lookup_503",
        "plain",
        None,
    ),
    "no_cas_on_result": (
        "lease_expiry_slow_worker",
        "after_external_call",
        "idempotent",
        "SIGSTOP",
    ),
    "renew_without_owner_check": (
        "lease_expiry_slow_worker",
        "before_external_call",
        "plain",
        "SIGSTOP",
    ),
    "skip_reconcile_after_restart": (
        "state_store_restore",
        "restore_after_effect",
        "plain",
        "SIGKILL",
    ),
    "timeout_is_failure": (
        "ambiguous_timeout",
        "provider_delay_after_commit",
        "plain",
        None,
    ),
    "timestamp_in_payload": (
        "provider_error_before_commit",
        "fail_once",
        "idempotent",
        None,
    ),
    "uncapped_retries": (
        "provider_error_before_commit",
        "fail_past_cap",
        "idempotent",
        None,
    ),
    "relay_without_key": (
        "relay_crash_after_send",
        "after_relay_send",
        "idempotent",
        "SIGKILL",
    ),
    "restart_from_step_one": (
        "multi_step_job",
        "after_local_write@ticket",
        "idempotent",
        "SIGKILL",
    ),
    "step_key_per_attempt": (
        "multi_step_job",
        "after_external_call@ticket",
        "idempotent",
        "SIGKILL",
    ),
    "provider_memory_only": (
        "key_retention",
        "redelivered_after_key_expiry",
        "idempotent",
        None,
    ),
    "lease_by_worker_clock": ("clock_skew", "worker_behind", "plain", "SIGSTOP"),
    "identity_retry_anyway": (
        "identity_lost_on_recovery",
        "profile_changed",
        "idempotent",
        "SIGKILL",
    ),
    "retry_without_backoff": ("retry_backoff", "refused_repeatedly", "plain", None),
    "done_check_instead_of_lease": ("redelivery_storm", "two_stale_copies", "plain", "SIGSTOP"),
    "ack_when_child_lost": ("child_killed", "pool_child", "idempotent", "SIGKILL"),
    "upgrade_forgets_old_attempts": (
        "upgrade_during_recovery",
        "after_external_call",
        "idempotent",
        "SIGKILL",
    ),
    "cancel_checked_only_at_first_claim": (
        "cancel_in_flight",
        "cancel_before_commit",
        "idempotent",
        None,
    ),
}


def test_every_mutant_has_a_killing_cell() -> None:
    assert set(KILLING_CELLS) == set(MUTANTS)


@pytest.mark.parametrize("mutant", sorted(KILLING_CELLS))
def test_mutant_is_killed_by_the_invariant_it_predicts(mutant: str) -> None:
    scenario, point, provider, signal = KILLING_CELLS[mutant]
    r = run_cell(scenario, point, provider, signal, mutant=mutant)
    assert r.verdict == "violated", describe(r)
    caught = {v.invariant for v in r.violations}
    assert MUTANTS[mutant].invariant in caught, describe(r)


@pytest.mark.parametrize(
    "cell",
    sorted(set(KILLING_CELLS.values()), key=str),
    ids=lambda c: ".".join(x or "none" for x in c),
)
def test_correct_worker_holds_every_killing_cell(
    cell: tuple[str, str, str, str | None],
) -> None:
    r = run_cell(*cell)
    assert r.verdict == "held", describe(r)
    assert r.reached, describe(r)


#: Mutants that a Toxiproxy cell (a lost response, not a provider fault) must kill too.
NETWORK_KILLS = {
    "timeout_is_failure": ("ambiguous_timeout", "toxic_timeout", "plain", None),
    "lookup_error_is_not_found": ("reset_after_commit", "toxic_reset_peer", "plain", None),
}


@pytest.mark.toxiproxy
@pytest.mark.parametrize("mutant", sorted(NETWORK_KILLS))
def test_network_cell_kills_mutant(mutant: str) -> None:
    r = run_cell(*NETWORK_KILLS[mutant], mutant=mutant)
    assert r.verdict == "violated", describe(r)
    assert "no_duplicate_effect" in {v.invariant for v in r.violations}, describe(r)
    assert any(e["kind"] == "toxic_on" for e in r.events)
    held = run_cell(*NETWORK_KILLS[mutant])
    assert held.verdict == "held", describe(held)


CELL = ".plain.SIGKILL.sqlite.process"
#: Two cells per worker: key_persisted_after_call (plain) dies in the first, its exposing
#: scenario, so its second is one not to run.
SMALL = [
    "--scenario",
    "crash_after_external_success",
    "--scenario",
    "crash_before_external_call",
    "--provider",
    "plain",
    "--signal",
    "SIGKILL",
    "--seed",
    "5",
]
KILLER = "key_persisted_after_call.crash_after_external_success.after_external_call" + CELL
SPARED = "key_persisted_after_call.crash_before_external_call.before_external_call" + CELL


def _selftest(scratch: Path, out: Path, *args: str) -> tuple[int, dict[str, Any]]:
    args = (*SMALL, *args, "--out", str(out))
    done = run(list(args), scratch, timeout_s=600, command="selftest")
    assert (out / "results.json").is_file(), done.stderr[-3000:]
    return done.returncode, results(out)


def _outcomes(doc: dict[str, Any]) -> dict[str, tuple[bool, bool]]:
    rows = doc["kill_matrix"]["mutants"]
    return {name: (row["killed"], row["caught_as_expected"]) for name, row in rows.items()}


def test_selftest_runs_no_more_of_a_mutant_once_it_is_caught_and_full_runs_all(
    scratch: Path, tmp_path: Path
) -> None:
    # One trial at a time: the kill is recorded before any later cell is considered.
    code, doc = _selftest(scratch, tmp_path / "fast", "-j", "1")
    km = doc["kill_matrix"]
    assert km["mode"] == "until_killed"
    by_id = {t["id"]: t for t in doc["trials"]}
    correct = [t for t in doc["trials"] if t["mutant"] is None]
    assert [t["verdict"] for t in correct] == ["held", "held"], "the correct worker runs in full"
    assert km["correct_worker"] == {"trials": 2, "violations": 0, "inconclusive": 0}

    row = km["mutants"]["key_persisted_after_call"]
    assert row["killed"], row
    assert row["caught_as_expected"], row
    assert row["by"] == [KILLER]
    assert row["scenarios"] == {
        "crash_after_external_success": "killed",
        "crash_before_external_call": "not run",
    }
    assert (row["trials"], row["not_run"]) == (2, 1)
    spared = by_id[SPARED]
    assert spared["verdict"] == "skipped", spared
    assert spared["reason"] == f"mutant already killed by {KILLER}"
    assert spared["events"] == [], "the spared cell never started"
    # Every cell of the plan is a trial; each one not run names a kill of its own mutant
    # by the invariant that mutant predicts.
    assert len(doc["trials"]) == 2 * (1 + len(MUTANTS))
    for t in doc["trials"]:
        if t["verdict"] == "skipped":
            killer = by_id[t["reason"].removeprefix("mutant already killed by ")]
            assert killer["mutant"] == t["mutant"], t
            caught = {v["invariant"] for v in killer["violations"]}
            assert MUTANTS[t["mutant"]].invariant in caught, killer
    assert sum(r["not_run"] for r in km["mutants"].values()) == doc["summary"]["skipped"] > 0

    full_code, full = _selftest(scratch, tmp_path / "full", "-j", "2", "--full")
    fkm = full["kill_matrix"]
    assert fkm["mode"] == "full"
    assert full["summary"]["skipped"] == 0, "--full runs every cell"
    assert all(r["not_run"] == 0 for r in fkm["mutants"].values())
    assert len(full["trials"]) == len(doc["trials"])
    ran = next(t for t in full["trials"] if t["id"] == SPARED)
    assert ran["verdict"] != "skipped", ran
    spared_there = fkm["mutants"]["key_persisted_after_call"]["scenarios"]
    assert spared_there["crash_before_external_call"] in ("killed", "survived")
    # Stopping early changes what ran, never which mutants are killed or caught as expected.
    assert _outcomes(full) == _outcomes(doc)
    assert full_code == code == ExitCode.VIOLATED, "this selection leaves mutants alive"
