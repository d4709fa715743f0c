"""no_effect_after_cancel on hand-made histories: the write in flight when the job was
cancelled may land; an effect whose write reached the provider after the cancel was
acknowledged is a violation, citing the cancel; a replay is no effect."""

from __future__ import annotations

from harness.history import Event
from harness.oracle import check
from harness.oracle.cancel import NAME
from tests.unit.test_oracle import facts, history, write


def cancelled(t: float, job: str = "j-1") -> Event:
    return Event(t, "supervisor", "cancel", job, None, {"text": f"{job} cancelled"})


def _found(*arrivals: object, cancel_at: float = 1.0) -> list[str]:
    events = history(list(arrivals), cancelled(cancel_at))  # type: ignore[arg-type]
    return [v.invariant for v in check(events, facts())]


def test_the_write_in_flight_when_the_job_was_cancelled_may_land() -> None:
    # Sent at 0.9, committed and answered after the cancel at 1.0: it started before it.
    assert _found(write(0.9)) == []


def test_a_retry_that_makes_an_effect_after_the_cancel_is_caught_citing_it() -> None:
    dropped = write(0.9, status=None, committed=False)
    events = history([dropped, write(1.2)], cancelled(1.0))
    (v,) = check(events, facts())
    assert v.invariant == NAME
    assert "0.200 s after the job's cancel was acknowledged" in v.message
    assert any(events[i].kind == "cancel" for i in v.events)


def test_a_replay_after_the_cancel_is_no_effect() -> None:
    replay = write(1.2, committed=False, replayed=True, status=200)
    assert _found(write(0.9), replay) == []


def test_a_job_never_cancelled_is_not_judged() -> None:
    other = write(1.2, job_id="j-2", idempotency_key="effect-j-2")
    assert NAME not in _found(other)
