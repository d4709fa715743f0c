"""Each scenario really exercises its boundary (real workers, signals and providers).

A trial that ``held`` proves nothing if the fault never landed where the table says, so
every test here checks the timeline for the mark the scenario must leave: the signal at
the boundary, the lookup before the retry, the late write that was rejected.
"""

from __future__ import annotations

import pytest
from trialkit import describe, effects, events, lookups, run_cell, writes

pytestmark = pytest.mark.process


def test_crash_before_external_call_is_reclaimed_after_the_lease() -> None:
    r = run_cell("crash_before_external_call", "before_external_call", "plain", "SIGKILL")
    assert r.verdict == "held", describe(r)
    assert r.reached
    held = events(r, "failpoint", point="before_external_call", held=True, job="j-0001")
    assert held
    assert held[0]["source"] == "worker:w1"
    assert events(r, "worker_exit", worker="w1", status="killed by SIGKILL")
    claims = [e["fields"]["token"] for e in events(r, "claim", job="j-0001")]
    assert claims == [1, 2], describe(r)  # the dead owner's lease expired, then a reclaim
    assert [w["fields"]["worker"] for w in writes(r)] == ["w2"]


@pytest.mark.parametrize(
    ("point", "committed"),
    [("provider_hold_before_commit", False), ("provider_hold_after_commit", True)],
)
def test_crash_during_external_call_is_reconciled(point: str, committed: bool) -> None:
    r = run_cell("crash_during_external_call", point, "plain", "SIGKILL")
    assert r.verdict == "held", describe(r)
    hold = events(r, "hold", job="j-0001")
    assert hold
    assert hold[0]["fields"]["committed"] is committed
    kill = events(r, "signal", worker="w1")
    assert kill
    assert kill[0]["t"] > hold[0]["t"]
    first_write = writes(r)[0]
    assert first_write["fields"]["worker"] == "w1"
    assert first_write["fields"]["committed"] is committed
    # Recovery looked before it acted, and ended with exactly one effect.
    recovery_lookup = [e for e in lookups(r) if e["fields"]["worker"] == "w2"]
    assert recovery_lookup, describe(r)
    later_writes = [w for w in writes(r) if w["fields"]["worker"] == "w2"]
    assert all(w["t"] > recovery_lookup[0]["t"] for w in later_writes)
    assert bool(later_writes) is not committed
    assert effects(r) == 1


def test_crash_after_external_success_confirms_instead_of_resending() -> None:
    r = run_cell("crash_after_external_success", "after_external_call", "idempotent", "SIGKILL")
    assert r.verdict == "held", describe(r)
    assert events(r, "failpoint", point="after_external_call", held=True, job="j-0001")
    assert [w["fields"]["worker"] for w in writes(r)] == ["w1"]
    assert [e["fields"]["status"] for e in lookups(r)] == [200]
    assert effects(r) == 1


def test_unqueryable_crash_after_success_ends_in_review() -> None:
    r = run_cell("crash_after_external_success", "after_external_call", "unqueryable", "SIGKILL")
    assert r.verdict == "held", describe(r)
    assert len(writes(r)) == 1  # never replayed
    reviews = events(r, "result_write", job="j-0001", wrote="needs_review", accepted=True)
    assert reviews, describe(r)


def test_duplicate_delivery_keeps_one_effect_by_its_key() -> None:
    r = run_cell("duplicate_delivery", "redelivered_while_in_flight", "idempotent")
    assert r.verdict == "held", describe(r)
    enqueues = events(r, "enqueue", job="j-0001")
    hold = events(r, "hold", job="j-0001")
    assert len(enqueues) == 2
    assert hold
    assert enqueues[1]["t"] > hold[0]["t"]  # delivered again while the first was in flight
    # The second consumer's write met the first one's key in flight, and waited.
    second = [w["fields"]["status"] for w in writes(r) if w["fields"]["worker"] == "w2"]
    assert second == [409], describe(r)
    assert effects(r) == 1


@pytest.mark.parametrize("provider", ["idempotent", "plain"])
def test_lease_expiry_rejects_the_stale_owners_late_write(provider: str) -> None:
    r = run_cell("lease_expiry_slow_worker", "after_external_call", provider, "SIGSTOP")
    assert r.verdict == "held", describe(r)
    stop = events(r, "signal", signal="SIGSTOP", worker="w1")
    cont = events(r, "signal", signal="SIGCONT", worker="w1")
    assert stop
    assert cont
    taken = events(r, "claim", job="j-0001", token=2)
    assert taken
    assert stop[0]["t"] < taken[0]["t"] < cont[0]["t"]
    late = events(r, "result_write", job="j-0001", token=1, source="worker:w1")
    assert late, "the thawed owner never tried its late write: " + describe(r)
    assert all(e["fields"]["accepted"] is False for e in late)
    assert all(e["t"] > cont[0]["t"] for e in late)


def test_lease_expiry_before_the_call_makes_no_late_call() -> None:
    r = run_cell("lease_expiry_slow_worker", "before_external_call", "plain", "SIGSTOP")
    assert r.verdict == "held", describe(r)
    cont = events(r, "signal", signal="SIGCONT", worker="w1")
    assert cont
    assert [w["fields"]["worker"] for w in writes(r)] == ["w2"]
    # The thawed owner looked at its lease, found it gone, and did not call out.
    noticed = events(r, "lease_expired", source="worker:w1", step="before_external_call")
    assert noticed, describe(r)
    assert noticed[0]["t"] > cont[0]["t"]
    assert effects(r) == 1


@pytest.mark.parametrize(("provider", "review"), [("plain", False), ("unqueryable", True)])
def test_state_store_restore_reconciles_before_acting(provider: str, review: bool) -> None:
    r = run_cell("state_store_restore", "restore_after_effect", provider, "SIGKILL")
    assert r.verdict == "held", describe(r)
    restore = events(r, "restore")
    assert restore
    after = [w for w in writes(r) if w["t"] > restore[0]["t"]]
    assert after == [], "a write after the restore: " + describe(r)
    if review:
        assert events(r, "result_write", job="j-0001", wrote="needs_review", accepted=True)
    else:
        assert [e for e in lookups(r) if e["t"] > restore[0]["t"]]
    assert effects(r) == 1


def test_provider_error_once_is_retried_to_success() -> None:
    r = run_cell("provider_error_before_commit", "fail_once", "plain")
    assert r.verdict == "held", describe(r)
    statuses = [w["fields"]["status"] for w in writes(r)]
    assert statuses == [503, 201]


def test_provider_error_past_the_cap_is_dead_lettered() -> None:
    r = run_cell("provider_error_before_commit", "fail_past_cap", "idempotent")
    assert r.verdict == "held", describe(r)
    assert [w["fields"]["status"] for w in writes(r)] == [503, 503, 503]
    assert events(r, "result_write", job="j-0001", wrote="failed", accepted=True)
    assert effects(r) == 0


def test_simultaneous_trigger_gives_one_durable_claim() -> None:
    r = run_cell("simultaneous_trigger", "same_moment", "plain")
    assert r.verdict == "held", describe(r)
    assert len(events(r, "enqueue", job="j-0001")) == 2
    assert [e["fields"]["token"] for e in events(r, "claim", job="j-0001")] == [1]
    assert effects(r) == 1


@pytest.mark.parametrize("provider", ["idempotent", "plain"])
def test_delayed_response_is_unknown_and_reconciled(provider: str) -> None:
    r = run_cell("ambiguous_timeout", "provider_delay_after_commit", provider)
    assert r.verdict == "held", describe(r)
    first = writes(r)[0]
    assert first["fields"]["committed"]
    unknown = events(r, "result_write", job="j-0001", wrote="unknown", accepted=True)
    assert unknown, "the timeout was not recorded as unknown: " + describe(r)
    assert [e for e in lookups(r) if e["t"] > unknown[0]["t"]], describe(r)
    assert effects(r) == 1


def test_lookup_503_keeps_the_job_unknown_until_the_provider_answers() -> None:
    r = run_cell("provider_down_during_reconcile", "provider_lookup_503", "plain")
    assert r.verdict == "held", describe(r)
    statuses = [e["fields"]["status"] for e in lookups(r)]
    assert statuses[:2] == [503, 503], describe(r)
    assert statuses[-1] == 200, describe(r)
    assert len(writes(r)) == 1
