"""upgrade_during_recovery: the worker dies at after_external_call and the job is
recovered by the target's next release. The reference's version 2 names its keys
differently, yet reconciles version 1's unknown attempt under the key that was sent:
one effect. Its upgrade_forgets_old_attempts mutant takes that attempt for none and
writes again under a version 2 key (no_duplicate_effect); no other row starts version 2."""

from __future__ import annotations

import pytest
from trialkit import describe, effects, events, lookups, run_cell, writes

pytestmark = pytest.mark.process

CELL = ("upgrade_during_recovery", "after_external_call")


@pytest.mark.parametrize("provider", ["idempotent", "plain"])
def test_the_new_release_reconciles_the_old_attempt_under_its_key(provider: str) -> None:
    r = run_cell(*CELL, provider, "SIGKILL")
    assert (r.verdict, r.reached) == ("held", True), describe(r)
    (note,) = [e for e in events(r, "note") if "upgraded command" in e["fields"].get("text", "")]
    assert note["fields"]["worker"] == "w2"
    assert (effects(r), len(writes(r))) == (1, 1), describe(r)
    # w2 asked the provider before writing anything, by the key (or marker) w1 sent.
    assert lookups(r), describe(r)
    if provider == "idempotent":
        assert {x["fields"]["idempotency_key"] for x in lookups(r)} == {"effect-j-0001"}
        # A job w2 started itself carries version 2's key.
        (other,) = writes(r, "j-0002")
        assert other["fields"]["idempotency_key"] == "v2-effect-j-0002"


def test_a_new_release_that_forgets_the_old_attempts_is_caught() -> None:
    r = run_cell(*CELL, "idempotent", "SIGKILL", mutant="upgrade_forgets_old_attempts")
    assert r.verdict == "violated", describe(r)
    assert "no_duplicate_effect" in {v.invariant for v in r.violations}, describe(r)
    keys = [w["fields"]["idempotency_key"] for w in writes(r)]
    assert keys == ["effect-j-0001", "v2-effect-j-0001"], describe(r)


def test_the_mutant_is_the_old_release_everywhere_else() -> None:
    # Without an upgrade the mutant is version 1, correct: the same crash holds.
    r = run_cell(
        "crash_after_external_success",
        "after_external_call",
        "idempotent",
        "SIGKILL",
        mutant="upgrade_forgets_old_attempts",
    )
    assert r.verdict == "held", describe(r)
