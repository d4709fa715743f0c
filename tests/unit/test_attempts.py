"""Open attempts read from the history: a claim stays open until its worker ends it."""

from __future__ import annotations

from harness.attempts import open_attempts, reports_claims
from harness.history import Event


def claim(t: float, worker: str, job: str, attempt: int) -> Event:
    return Event(t, f"worker:{worker}", "claim", job, attempt, {"token": attempt})


def boundary(t: float, worker: str, job: str, attempt: int, point: str) -> Event:
    return Event(t, f"worker:{worker}", "failpoint", job, attempt, {"point": point})


def result(t: float, worker: str, job: str, attempt: int, *, accepted: bool) -> Event:
    return Event(t, f"worker:{worker}", "result_write", job, attempt, {"accepted": accepted})


def test_a_claim_without_an_end_is_open() -> None:
    events = [claim(1.0, "w1", "j-1", 1), boundary(1.1, "w1", "j-1", 1, "before_external_call")]
    assert open_attempts(events, ["w1"]) == {("w1", "j-1", 1)}


def test_the_last_boundary_ends_the_attempt() -> None:
    events = [claim(1.0, "w1", "j-1", 1), boundary(1.2, "w1", "j-1", 1, "after_local_write")]
    assert open_attempts(events, ["w1"]) == set()


def test_an_accepted_unknown_result_does_not_end_it_but_a_rejected_one_does() -> None:
    accepted = [claim(1.0, "w1", "j-1", 1), result(1.1, "w1", "j-1", 1, accepted=True)]
    assert open_attempts(accepted, ["w1"]) == {("w1", "j-1", 1)}
    rejected = [claim(1.0, "w1", "j-1", 1), result(1.1, "w1", "j-1", 1, accepted=False)]
    assert open_attempts(rejected, ["w1"]) == set()


def test_a_lost_lease_after_the_claim_ends_it_one_before_does_not() -> None:
    lost = Event(1.5, "worker:w1", "lease_expired", None, None, {"step": "mark_submitted"})
    assert open_attempts([claim(1.0, "w1", "j-1", 1), lost], ["w1"]) == set()
    earlier = Event(0.5, "worker:w1", "lease_expired", None, None, {})
    assert open_attempts([earlier, claim(1.0, "w1", "j-1", 1)], ["w1"]) == {("w1", "j-1", 1)}


def test_only_the_latest_claim_of_a_worker_counts() -> None:
    events = [
        claim(1.0, "w1", "j-1", 1),
        boundary(1.1, "w1", "j-1", 1, "after_local_write"),
        claim(1.2, "w1", "j-2", 1),
    ]
    assert open_attempts(events, ["w1"]) == {("w1", "j-2", 1)}


def test_an_exited_worker_holds_no_attempt() -> None:
    events = [claim(1.0, "w1", "j-1", 1), claim(1.1, "w2", "j-2", 1)]
    assert open_attempts(events, ["w2"]) == {("w2", "j-2", 1)}


def test_an_end_for_another_attempt_does_not_close_this_one() -> None:
    events = [
        claim(1.0, "w1", "j-1", 2),
        boundary(1.1, "w1", "j-1", 1, "after_local_write"),
        result(1.2, "w2", "j-1", 2, accepted=False),
    ]
    assert open_attempts(events, ["w1", "w2"]) == {("w1", "j-1", 2)}


def test_claims_tell_whether_attempts_can_be_read() -> None:
    assert reports_claims([claim(1.0, "w1", "j-1", 1)])
    arrival = Event(1.0, "provider:svc", "arrival", "j-1", None, {})
    assert not reports_claims([arrival, boundary(1.0, "w1", "j-1", 1, "after_local_write")])
