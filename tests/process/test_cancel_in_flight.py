"""cancel_in_flight: the job's write is held at the provider while the job is cancelled
through the target, then dropped. The reference worker reads its ledger's cancel
requests before each effect: the retry after the dropped write stops, and the job is
dead-lettered. The write in flight may land (after commit it has). Its
cancel_checked_only_at_first_claim mutant retries anyway: no_effect_after_cancel, and
only that, since the job still has one effect."""

from __future__ import annotations

import pytest
from trialkit import describe, effects, events, run_cell, writes

pytestmark = pytest.mark.process


@pytest.mark.parametrize("provider", ["idempotent", "plain"])
def test_the_retry_after_a_cancel_makes_no_effect(provider: str) -> None:
    r = run_cell("cancel_in_flight", "cancel_before_commit", provider)
    assert (r.verdict, r.reached) == ("held", True), describe(r)
    (cancel,) = events(r, "cancel", job="j-0001")
    assert effects(r) == 0, describe(r)
    wrote = [e["fields"]["wrote"] for e in events(r, "result_write", job="j-0001")]
    assert wrote[-1] == "failed", describe(r)  # dead-lettered as cancelled, after the cancel
    assert all(w["t"] < cancel["t"] for w in writes(r)), describe(r)


def test_the_write_in_flight_may_land() -> None:
    r = run_cell("cancel_in_flight", "cancel_after_commit", "plain")
    assert (r.verdict, r.reached) == ("held", True), describe(r)
    assert effects(r) == 1, describe(r)
    (cancel,) = events(r, "cancel", job="j-0001")
    (write,) = writes(r)
    assert write["t"] < cancel["t"]


@pytest.mark.parametrize("provider", ["idempotent", "plain"])
def test_a_cancel_checked_only_at_the_first_claim_is_caught(provider: str) -> None:
    r = run_cell(
        "cancel_in_flight",
        "cancel_before_commit",
        provider,
        mutant="cancel_checked_only_at_first_claim",
    )
    assert r.verdict == "violated", describe(r)
    assert {v.invariant for v in r.violations} == {"no_effect_after_cancel"}, describe(r)
    assert effects(r) == 1, describe(r)
