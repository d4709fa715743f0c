"""identity_bound on hand-made histories: no write as another identity, none after the
provider refused the job's own; unjudged, never alarmed, when no request names one."""

from __future__ import annotations

from typing import Any

from harness.history import Event
from harness.observe import arrival_event
from harness.oracle import TrialFacts, check, unjudged
from harness.oracle.identity import NO_IDENTITY_HEADER
from tests.unit.test_oracle import lookup, write


def _bound(identity: str = "acct-1") -> Event:
    return Event(
        t=0.0, source="supervisor", kind="enqueue", job="j-1", fields={"identity": identity}
    )


def _judge(*arrivals: Any, bound: bool = True) -> tuple[list[str], dict[str, str]]:
    events = ([_bound()] if bound else []) + [arrival_event(a) for a in arrivals]
    facts = TrialFacts(jobs=("j-1",), provider_kinds={"svc": "idempotent"}, quiescent=False)
    found = [v.invariant for v in check(events, facts) if v.invariant == "identity_bound"]
    return found, unjudged(events, facts)


def test_writes_under_the_jobs_identity_hold() -> None:
    found, notes = _judge(write(1.0, identity="acct-1"))
    assert found == []
    assert "identity_bound" not in notes


def test_a_write_acting_as_another_identity_is_caught() -> None:
    found, _ = _judge(
        lookup(1.0, status=403, identity="acct-1"), write(2.0, identity="acct-someone-else")
    )
    assert found == ["identity_bound"]


def test_a_write_after_the_identity_was_refused_is_caught() -> None:
    refused = lookup(1.0, status=401, identity="acct-1")
    found, _ = _judge(refused, write(2.0, identity="acct-1", status=401, committed=False))
    assert found == ["identity_bound"]


def test_one_refused_write_and_a_stop_hold() -> None:
    assert _judge(write(1.0, identity="acct-1", status=401, committed=False))[0] == []


def test_an_identity_served_again_is_verified_again() -> None:
    found, _ = _judge(
        lookup(1.0, status=401, identity="acct-1"),
        lookup(2.0, status=404, identity="acct-1"),
        write(3.0, identity="acct-1"),
    )
    assert found == []


def test_a_target_sending_no_identity_is_unjudged_not_alarmed() -> None:
    found, notes = _judge(write(1.0), write(2.0))
    assert found == []
    assert notes["identity_bound"] == NO_IDENTITY_HEADER


def test_jobs_naming_no_identity_leave_the_invariant_silent() -> None:
    found, notes = _judge(write(1.0, identity="acct-9"), bound=False)
    assert found == []
    assert "identity_bound" not in notes


def test_a_history_recorded_before_identities_still_loads() -> None:
    old = arrival_event(write(1.0))
    del old.fields["identity"]
    facts = TrialFacts(jobs=("j-1",), provider_kinds={"svc": "idempotent"}, quiescent=False)
    assert check([old], facts) == []
