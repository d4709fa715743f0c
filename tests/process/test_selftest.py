"""The harness catches every mutant it claims to, by the invariant the mutant predicts,
and the correct worker holds the very same cells (so no catch is a false positive)."""

from __future__ import annotations

import pytest
from trialkit import describe, run_cell

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
