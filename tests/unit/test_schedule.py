"""The fault schedule as data: JSON round trip, readable errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings

from harness.contract.errors import ConfigError
from harness.exploration.strategy import Space, schedules
from harness.schedule import SCHEMA, FaultStep, Schedule, is_schedule_file, load, loads, save


def _schedule() -> Schedule:
    return Schedule(
        "plain",
        (
            FaultStep("after_external_call", "kill", hit=2, signal="SIGTERM"),
            FaultStep("start", "provider_fault", fault="fail_lookup", times=3),
            FaultStep("commit", "toxic", toxic="timeout", attributes={"timeout": 0}, duration_s=1),
        ),
        jobs=2,
        workers=2,
        mutant="timeout_is_failure",
    )


def test_a_schedule_survives_its_json(tmp_path: Path) -> None:
    s = _schedule()
    path = save(s, tmp_path / "finding.json")
    assert load(path) == s
    assert is_schedule_file(path)
    doc = json.loads(path.read_text())
    assert doc["schema"] == SCHEMA
    # Only what each action means is written: a kill carries no toxic.
    assert doc["faults"][0] == {
        "at": "after_external_call",
        "hit": 2,
        "action": "kill",
        "signal": "SIGTERM",
        "restart": True,
    }


def test_the_description_says_where_and_which_hit() -> None:
    assert _schedule().faults[0].describe() == "kill SIGTERM at after_external_call (2nd hit)"
    assert _schedule().size == (3, 2, 2)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(schema="crashpoint.results/1"), "schema='crashpoint.results/1'"),
        (lambda d: d.update(provider="smtp"), "provider='smtp' is not a provider kind"),
        (lambda d: d.update(jobs=0), "jobs=0 must be an integer from 1 to 16"),
        (lambda d: d.update(color="red"), "unknown key 'color'"),
        (lambda d: d["faults"][0].update(at="lunch"), "faults[0].at='lunch' is not a boundary"),
        (lambda d: d["faults"][1].update(hit=0), "faults[1].hit=0 must be an integer"),
        (lambda d: d["faults"][0].update(signal="SIGSTOP"), "faults[0].signal='SIGSTOP'"),
        (lambda d: d["faults"][2].pop("action"), "faults[2]: action is missing"),
        (lambda d: d["faults"][2].update(attributes={"timeout": "x"}), "faults[2].attributes="),
    ],
)
def test_a_bad_schedule_is_one_line_naming_the_key(edit: object, message: str) -> None:
    doc = _schedule().to_json()
    assert callable(edit)
    edit(doc)
    with pytest.raises(ConfigError) as info:
        loads(json.dumps(doc), source="finding.json")
    text = str(info.value)
    assert text.startswith("finding.json: ")
    assert message in text
    assert "\n" not in text


def test_not_json_is_said_so() -> None:
    with pytest.raises(ConfigError, match=r"finding\.json: not JSON"):
        loads("{", source="finding.json")


def test_a_restore_cannot_wait_on_a_held_request() -> None:
    with pytest.raises(ConfigError, match="cannot carry a restore"):
        FaultStep("arrival", "restore")


@settings(max_examples=50, database=None)
@given(schedules(Space(network=True)))
def test_every_drawn_schedule_survives_its_json(s: Schedule) -> None:
    assert loads(s.dumps()) == s
    assert 1 <= len(s.faults) <= 4
    # A duplicate to a second consumer is drawn only where a key can protect it.
    if s.provider != "idempotent":
        assert all(f.action != "duplicate" for f in s.faults)
