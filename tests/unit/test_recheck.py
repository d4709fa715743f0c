"""Stored histories judged again: the round trip through results.json changes nothing,
and a changed fact (or oracle) changes the verdict, with the change named."""

from __future__ import annotations

import copy
import json
from typing import Any

from harness.oracle import check
from harness.oracle.stored import events_from_json, facts_from_json, facts_to_json, start_of
from harness.recheck import rejudge_document
from tests.unit.test_oracle import claim, done, facts, history, result, write

#: A monotonic start far from zero, as a real trial's is: stored times are relative to it.
T0 = 5000.0


def _trial(verdict: str, events: list[Any], trial_facts: Any) -> dict[str, Any]:
    return {
        "id": "t1",
        "provider": "idempotent",
        "provider_name": "svc",
        "verdict": verdict,
        "reason": None,
        "violations": [],
        "events": [e.to_json(t0=T0) for e in events],
        "facts": facts_to_json(trial_facts, t0=T0),
    }


def _late_write() -> tuple[list[Any], Any]:
    """A stale owner's result write accepted after another worker claimed: fenced_writes."""
    events = history(
        [write(T0 + 0.2, fencing_token="1")],
        claim(T0 + 0.1, 1, "w1"),
        claim(T0 + 0.5, 2, "w2"),
        result(T0 + 0.6, 2, "w2", accepted=True),
        result(T0 + 0.9, 1, "w1", accepted=True),
    )
    return events, facts(job_states=[done()])


def test_the_stored_form_judges_as_the_live_one() -> None:
    events, trial_facts = _late_write()
    live = {v.invariant for v in check(events, trial_facts)}
    trial = json.loads(json.dumps(_trial("violated", events, trial_facts)))
    back = events_from_json(trial["events"], t0=start_of(trial["events"], trial["facts"]))
    assert {v.invariant for v in check(back, facts_from_json(trial["facts"]))} == live
    assert live == {"fenced_writes"}


def test_the_start_is_found_again_from_provider_rows_when_not_stored() -> None:
    events, trial_facts = _late_write()
    trial = _trial("violated", events, trial_facts)
    del trial["facts"]["t0"]
    assert abs(start_of(trial["events"], trial["facts"]) - T0) < 1e-6


def test_a_verdict_that_moves_is_named() -> None:
    events, trial_facts = _late_write()
    doc = {"run_id": "r1", "trials": [_trial("held", events, trial_facts)]}
    new, changes = rejudge_document(copy.deepcopy(doc))
    [change] = changes
    assert (change.trial, change.was, change.now) == ("t1", "held", "violated")
    assert change.now_invariants == ("fenced_writes",)
    assert new["summary"]["violated"] == 1
    assert new["trials"][0]["recheck"] == {"was": "held", "facts": "stored"}


def test_an_unchanged_verdict_is_no_change() -> None:
    events, trial_facts = _late_write()
    trial = _trial("violated", events, trial_facts)
    trial["violations"] = [{"invariant": "fenced_writes"}]
    _, changes = rejudge_document({"trials": [trial]})
    assert changes == []


def test_a_trial_never_judged_keeps_its_verdict() -> None:
    trial = {"id": "t2", "verdict": "skipped", "events": [], "violations": []}
    new, changes = rejudge_document({"trials": [trial]})
    assert changes == []
    assert new["trials"][0]["verdict"] == "skipped"


def test_a_history_another_version_wrote_is_kept_with_a_note() -> None:
    trial = {
        "id": "t3",
        "provider": "plain",
        "verdict": "held",
        "violations": [],
        "events": [{"t": 0.1, "source": "provider:svc", "kind": "arrival", "fields": {"id": 1}}],
    }
    new, changes = rejudge_document({"trials": [trial]})
    assert changes == []
    assert new["trials"][0]["recheck"]["note"].startswith("cannot be judged again")
