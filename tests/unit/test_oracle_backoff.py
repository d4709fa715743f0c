"""min_backoff on hand-made histories: a declared backoff is held to the providers' own
arrival times, only after a refused write, and an undeclared one is reported, never judged."""

from __future__ import annotations

from typing import Any

from harness.oracle import check, unjudged
from harness.oracle.backoff import NAME, TOLERANCE_S
from tests.unit.test_oracle import facts, history, write


def refused(t: float, **kw: Any) -> Any:
    return write(t, status=503, committed=False, fault="fail_before_commit", **kw)


def _judge(*arrivals: Any, least: float | None = 0.1) -> tuple[list[str], dict[str, str]]:
    f = facts(min_backoff_s=least)
    events = history(list(arrivals))
    return [v.invariant for v in check(events, f)], unjudged(events, f)


def test_retries_that_wait_the_declared_backoff_hold() -> None:
    found, notes = _judge(refused(1.0), refused(1.1), write(1.3))
    assert found == []
    assert NAME not in notes


def test_a_retry_sooner_than_the_declared_backoff_is_caught() -> None:
    found, _ = _judge(refused(1.0), refused(1.1), write(1.12))
    assert found == [NAME]


def test_the_tolerance_absorbs_a_transit_and_no_more() -> None:
    just_inside = 0.1 - TOLERANCE_S + 0.001
    assert _judge(refused(1.0), write(1.0 + just_inside))[0] == []
    assert _judge(refused(1.0), write(1.0 + 0.1 - TOLERANCE_S - 0.001))[0] == [NAME]


def test_only_a_refused_write_asks_for_a_backoff() -> None:
    # A 409 in flight, a 422 and an unanswered write are followed by reconciliation,
    # which other invariants judge; none of them is a refusal to wait out.
    for earlier in (
        write(1.0, status=409, committed=False),
        write(1.0, status=422, committed=False),
        write(1.0, status=None, committed=False),
    ):
        assert _judge(earlier, write(1.01))[0] == [], earlier


def test_a_second_consumer_is_not_a_fast_retry() -> None:
    # Two consumers' writes of one job are not one worker's retries.
    from harness.history import Event

    note = Event(0.5, "supervisor", "note", fields={"worker": "c2w1", "consumer": 2})
    f = facts(min_backoff_s=0.1)
    events = history([refused(1.0, worker_id="w1"), write(1.01, worker_id="c2w1")], note)
    assert [v.invariant for v in check(events, f)] == []


def test_an_undeclared_backoff_reports_the_intervals_never_a_violation() -> None:
    found, notes = _judge(refused(1.0), refused(1.004), write(1.25), least=None)
    assert found == []
    assert "0.004, 0.246 s" in notes[NAME]
    assert "min_backoff_s" in notes[NAME]


def test_an_undeclared_backoff_is_unjudged_even_without_a_retry() -> None:
    # Listed as judged, it would read as held: nothing was held to anything.
    assert "no retry after a refused write" in _judge(write(1.0), least=None)[1][NAME]
