"""Traceability and the review desk on hand-built histories: the untraced_effect warning,
the trace rows (attempt, key, record id) and the review rows (the five pieces of evidence)."""

from __future__ import annotations

import dataclasses
from typing import Any

from fake_providers.models import Arrival, Effect
from harness.history import Event
from harness.observe import arrival_event, commit_event
from harness.oracle import WARNINGS, review_rows, trace_rows, warnings_of
from harness.oracle.trace import WARNING, untraced_effect
from tests.unit.test_oracle import claim, done, effect, facts, lookup, write


def recorded(arrival: Arrival) -> Effect:
    """The effect a committed write made, with the record id the provider gives it."""
    return dataclasses.replace(effect(arrival), external_id=f"rec_svc_{arrival.id:06d}")


def traced(arrivals: list[Arrival], *more: Event) -> list[Event]:
    events = [arrival_event(a) for a in arrivals]
    events += [commit_event(recorded(a)) for a in arrivals if a.kind == "write" and a.committed]
    return sorted([*events, *more], key=lambda e: e.t)


def warned(events: list[Event], **kw: Any) -> list[str]:
    return [w.message for w in warnings_of(events, facts(**kw)) if w.invariant == WARNING]


def test_the_check_is_registered_as_a_warning() -> None:
    assert WARNINGS[WARNING] is untraced_effect


def test_a_done_job_that_kept_the_record_id_is_silent() -> None:
    w = write(1.0)
    events = traced([w])
    assert warned(events, job_states=[done(external_ref=f"rec_svc_{w.id:06d}")]) == []


def test_a_worker_that_keeps_the_integer_id_is_traced_too() -> None:
    w = write(1.0)
    assert warned(traced([w]), job_states=[done(external_ref=str(w.id))]) == []


def test_a_done_job_without_an_external_reference_is_a_warning() -> None:
    w = write(1.0)
    found = warnings_of(traced([w]), facts(job_states=[done(external_ref=None)]))
    assert [v.invariant for v in found] == [WARNING]
    assert found[0].job == "j-1"
    assert f"rec_svc_{w.id:06d}" in found[0].message
    assert "kept no external reference" in found[0].message
    # The evidence cites the commit, so the report can link the effect that went untraced.
    assert found[0].evidence["effects"][0]["external_id"] == f"rec_svc_{w.id:06d}"
    assert found[0].events


def test_a_blank_reference_counts_as_none() -> None:
    assert warned(traced([write(1.0)]), job_states=[done(external_ref="  ")])


def test_a_reference_to_a_record_the_job_never_made_is_a_warning() -> None:
    mine, other = write(1.0), write(2.0, job_id="j-2", idempotency_key="effect-j-2")
    events = traced([mine, other])
    states = [done(external_ref=f"rec_svc_{other.id:06d}"), done("j-2", external_ref="x")]
    messages = warned(events, jobs=["j-1", "j-2"], job_states=states)
    assert len(messages) == 2
    assert "names none of its effects" in messages[0]


def test_jobs_not_done_and_targets_without_states_are_not_judged() -> None:
    events = traced([write(1.0)])
    review = done(delivery_state="queued", needs_review=True)
    assert warned(events, job_states=[review]) == []
    assert warned(events, job_states=None) == []


def test_trace_rows_tie_each_effect_to_its_attempt_key_and_record() -> None:
    first = write(1.0, status=None, fencing_token="1")
    second = write(2.0, fencing_token="2", replayed=False)
    events = traced(
        [first, second],
        claim(0.5, 1, "w1"),
        claim(1.5, 2, "w2"),
    )
    rows = trace_rows(events, facts(job_states=[done(external_ref=f"rec_svc_{second.id:06d}")]))
    assert [(r["job"], r["attempt"], r["idempotency_key"]) for r in rows] == [
        ("j-1", 1, "effect-j-1"),
        ("j-1", 2, "effect-j-1"),
    ]
    assert [r["external_id"] for r in rows] == [
        f"rec_svc_{first.id:06d}",
        f"rec_svc_{second.id:06d}",
    ]
    assert {r["recorded_ref"] for r in rows} == {f"rec_svc_{second.id:06d}"}
    for row in rows:
        assert events[row["event"]].kind == "commit"


def test_without_claims_the_attempt_is_the_one_the_worker_last_named() -> None:
    w = write(2.0, fencing_token=None)
    hit = Event(1.0, "worker:w1", "failpoint", "j-1", 3, {"point": "before_external_call"})
    rows = trace_rows(traced([w], hit), facts())
    assert rows[0]["attempt"] == 3
    assert rows[0]["recorded_ref"] is None


def test_a_review_row_carries_the_five_pieces_of_evidence() -> None:
    w = write(1.0, status=None, kind="write", path="/v1/sends", client_marker="cm-j-1")
    w = dataclasses.replace(w, idempotency_key=None, t_wall=1_780_000_000.25)
    seen = lookup(2.0, status=501, path="/v1/sends", idempotency_key=None)
    final = done(
        delivery_state="queued",
        execution_state="unknown",
        needs_review=True,
        attempts=2,
        idempotency_key="effect-j-1",
        last_error="no_response:ReadTimeout",
        review_reason="reconcile: unqueryable (http_501)",
    )
    events = traced([w, seen])
    rows = review_rows(events, facts(kind="unqueryable", job_states=[final, done("j-2")]))
    assert len(rows) == 1
    row = rows[0]
    assert row["job"] == "j-1"
    assert row["idempotency_key"] == "effect-j-1"
    assert row["client_marker"] == "cm-j-1"
    assert row["action"] == "POST /v1/sends at svc"
    assert row["at_wall"].startswith("2026-05-28T")
    assert events[row["at_event"]].kind == "arrival"
    assert row["last_error"] == "no_response:ReadTimeout"
    assert row["review_reason"] == "reconcile: unqueryable (http_501)"
    assert "lookup" in row["external_state"]
    assert "501" in row["external_state"]
    assert row["provider_records"] == [f"rec_svc_{w.id:06d}"]
    assert {events[i].kind for i in row["events"]} == {"arrival", "reconcile", "commit"}


def test_a_review_row_without_a_recorded_error_says_what_the_provider_answered() -> None:
    w = write(1.0, status=None, committed=False)
    final = done(delivery_state="queued", needs_review=True)
    row = review_rows(traced([w]), facts(job_states=[final]))[0]
    assert row["idempotency_key"] == "effect-j-1"
    assert "none recorded by the target" in row["last_error"]
    assert "no response" in row["last_error"]
    assert row["provider_records"] == []


def test_no_review_rows_without_job_states_or_review_jobs() -> None:
    events = traced([write(1.0)])
    assert review_rows(events, facts()) == []
    assert review_rows(events, facts(job_states=[done()])) == []
