"""Records read back from their events: the same objects their own constructors make."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from fake_providers.models import Arrival, Effect
from harness.history import Event, made_from, record_of
from harness.observe import arrival_event, commit_event
from harness.oracle.facts import read
from harness.oracle.loading import Loader
from tests.unit.test_observe import arrival


def effect(i: int, **kw: Any) -> Effect:
    base: dict[str, Any] = {
        "id": i,
        "provider": "svc",
        "job_id": "j-1",
        "idempotency_key": "k",
        "client_marker": None,
        "fingerprint": "f",
        "arrival_id": i,
        "t_mono": float(i),
        "t_wall": 0.0,
        "external_id": f"rec-{i}",
    }
    base.update(kw)
    return Effect(**base)


def test_a_loaded_record_is_the_one_its_constructor_makes() -> None:
    a = arrival(7, committed=True, identity="profile-a")
    loaded = Loader(Arrival)(arrival_event(a), 0)
    assert type(loaded) is Arrival
    assert loaded == a
    assert hash(loaded) == hash(a)
    assert repr(loaded) == repr(a)
    assert dataclasses.asdict(loaded) == dataclasses.asdict(a)
    assert vars(loaded) == vars(a), "the report's extra names stay out of the record"
    with pytest.raises(dataclasses.FrozenInstanceError):
        loaded.status = 500  # type: ignore[misc]


def test_a_field_added_later_takes_its_default_in_an_older_history() -> None:
    e = effect(2)
    fields = commit_event(e).fields
    del fields["external_id"]
    old = Event(2.0, "provider:svc", "commit", "j-1", None, fields)
    assert Loader(Effect)(old, 0) == dataclasses.replace(e, external_id=None)


def test_an_event_missing_a_required_field_is_named() -> None:
    fields = arrival_event(arrival(1)).fields
    del fields["fingerprint"]
    with pytest.raises(ValueError, match=r"event #4 .*arrival: fingerprint missing"):
        Loader(Arrival)(Event(1.0, "provider:svc", "arrival", "j-1", None, fields), 4)


def test_a_class_that_checks_its_fields_is_not_loaded_around_its_init() -> None:
    @dataclasses.dataclass(frozen=True)
    class Checked:
        n: int

        def __post_init__(self) -> None:
            if self.n < 0:
                raise ValueError("negative")

    @dataclasses.dataclass(frozen=True, slots=True)
    class Slotted:
        n: int

    for cls in (Checked, Slotted):
        with pytest.raises(TypeError, match="own __init__"):
            Loader(cls)


def test_records_point_at_the_events_they_were_read_from() -> None:
    a1, a2 = arrival(1, committed=True), arrival(2, job_id="j-2")
    events = [
        Event(0.5, "worker:w1", "claim", "j-1", 1, {"token": 1, "worker": "w1"}),
        arrival_event(a1),
        commit_event(effect(1)),
        arrival_event(a2),
        Event(3.0, "worker:w1", "result_write", "j-1", 1, {"token": 1, "accepted": True}),
    ]
    record = read(events)
    assert record.arrival_index == {("svc", 1): 1, ("svc", 2): 3}
    assert [record.index[r] for r in (*record.claims, *record.arrivals)] == [0, 1, 3]
    assert [record.index[r] for r in (*record.effects, *record.result_writes)] == [2, 4]
    assert record.result_writes[0].worker_id == "w1", "the worker named by the source"


def test_an_event_the_observer_made_hands_over_its_very_record() -> None:
    a = arrival(3, committed=True)
    event = arrival_event(a)
    assert record_of(event) is a
    assert Loader(Arrival)(event, 0) is a
    bare = Event(event.t, event.source, event.kind, event.job, event.attempt, dict(event.fields))
    assert event == bare, "the record is no part of the event's value"
    assert event.to_json() == bare.to_json()


def test_an_event_rebuilt_or_read_back_is_loaded_from_its_fields() -> None:
    a = arrival(4, committed=True)
    changed = dataclasses.replace(
        arrival_event(a), fields={**arrival_event(a).fields, "status": 500}
    )
    assert record_of(changed) is None
    assert Loader(Arrival)(changed, 0) == dataclasses.replace(a, status=500)
    # A record of another class is never taken for the one asked for.
    crossed = made_from(arrival_event(a), effect(4))
    assert Loader(Arrival)(crossed, 0) == a


def test_claim_and_result_write_rows_are_the_records_fields_in_order() -> None:
    from harness.oracle.facts import Claim, ResultWrite

    events = [
        Event(0.5, "worker:w1", "claim", "j-1", 1, {"token": 1, "worker": "w1"}),
        Event(1.5, "worker:w2", "claim", "j-1", 2, {"token": "2", "worker": "w2"}),
        Event(2.5, "worker:w1", "result_write", "j-1", 1, {"token": 1, "accepted": False}),
    ]
    record = read(events)
    assert record.claims == (
        Claim(job_id="j-1", token=1, worker_id="w1", t_mono=0.5),
        Claim(job_id="j-1", token=2, worker_id="w2", t_mono=1.5),
    )
    assert record.result_writes == (
        ResultWrite(job_id="j-1", token=1, worker_id="w1", accepted=False, t_mono=2.5),
    )
    assert record.top_token == {"j-1": 2}, "a token given as text is read as its number"
