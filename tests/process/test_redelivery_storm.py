"""redelivery_storm: three copies of one attempt, the two stale ones woken while the third
owns the job. The correct worker holds it with three claims made; the worker that asks
"is the job done?" instead of "do I still own it?" passes the two-copy row (its stale
copy wakes after the job is done) and is caught here."""

from __future__ import annotations

import pytest
from trialkit import describe, events, run_cell

pytestmark = pytest.mark.process

STORM = ("redelivery_storm", "two_stale_copies", "plain", "SIGSTOP")
TWO_COPIES = ("lease_expiry_slow_worker", "before_external_call", "plain", "SIGSTOP")
MUTANT = "done_check_instead_of_lease"


def test_the_correct_worker_holds_with_three_copies_claimed() -> None:
    r = run_cell(*STORM)
    assert (r.verdict, r.reached) == ("held", True), describe(r)
    owners = {e["source"] for e in events(r, "claim", job="j-0001")}
    assert owners == {"worker:w1", "worker:w2", "worker:w3"}, describe(r)
    # Only the owner of the third claim called out.
    callers = {e["fields"]["worker_id"] for e in events(r, "arrival", job="j-0001")}
    assert callers == {"w3"}, describe(r)


def test_a_done_check_passes_two_copies_and_is_caught_by_three() -> None:
    spared = run_cell(*TWO_COPIES, mutant=MUTANT)
    assert spared.verdict == "held", describe(spared)
    caught = run_cell(*STORM, mutant=MUTANT)
    assert caught.verdict == "violated", describe(caught)
    assert "fenced_writes" in {v.invariant for v in caught.violations}, describe(caught)
