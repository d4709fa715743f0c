"""sarif.json: valid SARIF 2.1.0, one result per violated cell, located at the failpoint."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from harness.contract.vocabulary import INVARIANTS
from reports import load_results
from reports.model import Results, Target, TimelineEvent
from reports.outputs import write_all
from reports.sarif import sarif_log

FIXTURES = Path(__file__).parents[1] / "fixtures"
SCHEMA = json.loads((FIXTURES / "sarif" / "sarif-schema-2.1.0.json").read_text())


def validate(doc: dict[str, Any]) -> None:
    jsonschema.Draft4Validator(SCHEMA).validate(doc)


def small() -> Results:
    return load_results(FIXTURES / "results" / "run_small.json")


def with_site(results: Results, file: str, line: int) -> Results:
    """run_small with the violated failpoint hit carrying its caller's file and line."""
    trials = []
    for t in results.trials:
        events = tuple(
            dataclasses.replace(e, fields={**e.fields, "file": file, "line": line})
            if e.kind == "failpoint"
            else e
            for e in t.events
        )
        trials.append(dataclasses.replace(t, events=events))
    return dataclasses.replace(results, trials=tuple(trials))


def test_the_schema_is_sarif_2_1_0_and_refuses_a_broken_log() -> None:
    assert "2.1.0" in SCHEMA["title"]
    with pytest.raises(jsonschema.ValidationError):
        validate({"version": "2.1.0", "runs": [{"results": []}]})  # no tool


def test_every_violated_cell_is_one_valid_result_whose_rule_is_its_invariant(
    tmp_path: Path,
) -> None:
    results = small()
    doc = sarif_log(results, tmp_path)
    validate(doc)
    run = doc["runs"][0]
    violated = {(t.scenario, t.id) for t in results.trials if t.verdict == "violated"}
    assert len(run["results"]) == len(violated) == 3
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules][: len(INVARIANTS)] == list(INVARIANTS)
    for result in run["results"]:
        rule = rules[result["ruleIndex"]]
        assert rule["id"] == result["ruleId"]
        assert rule["help"]["text"]
    first = run["results"][0]
    assert first["ruleId"] == "no_duplicate_effect"
    assert "idempotency key" in rules[first["ruleIndex"]]["help"]["text"]


def test_a_cell_run_under_two_seeds_is_one_result(tmp_path: Path) -> None:
    results = small()
    twice = dataclasses.replace(results, trials=results.trials + results.trials)
    assert len(sarif_log(twice, tmp_path)["runs"][0]["results"]) == 3


def test_the_location_is_the_failpoint_line_relative_to_the_source_root(tmp_path: Path) -> None:
    worker = tmp_path / "src" / "worker.js"
    doc = sarif_log(with_site(small(), str(worker), 286), tmp_path)
    validate(doc)
    located = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert located["artifactLocation"] == {"uri": "src/worker.js", "uriBaseId": "%SRCROOT%"}
    assert located["region"] == {"startLine": 286}


def test_without_a_failpoint_line_the_config_target_line_is_the_location(
    tmp_path: Path,
) -> None:
    results = dataclasses.replace(
        small(),
        target=Target("t", "command", extra={"config": "w/crashpoint.toml", "config_line": 4}),
    )
    doc = sarif_log(results, tmp_path)
    validate(doc)
    for result in doc["runs"][0]["results"]:
        located = result["locations"][0]["physicalLocation"]
        assert located["artifactLocation"]["uri"] == "w/crashpoint.toml"
        assert located["region"] == {"startLine": 4}


def test_a_file_outside_the_root_is_an_absolute_uri(tmp_path: Path) -> None:
    doc = sarif_log(with_site(small(), "/elsewhere/worker.py", 7), tmp_path / "repo")
    validate(doc)
    uri = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert uri == {"uri": "file:///elsewhere/worker.py"}


def test_a_held_run_writes_a_valid_empty_log_beside_junit(tmp_path: Path) -> None:
    held = dataclasses.replace(
        small(), trials=tuple(t for t in small().trials if t.verdict == "held")
    )
    files = write_all(held, tmp_path)
    assert files.sarif_json == tmp_path / "sarif.json"
    assert files.junit_xml.parent == tmp_path
    doc = json.loads(files.sarif_json.read_text())
    validate(doc)
    assert doc["runs"][0]["results"] == []


def test_the_failpoint_hit_that_was_held_is_preferred(tmp_path: Path) -> None:
    results = small()
    trial = next(t for t in results.trials if t.verdict == "violated")
    hit = next(e for e in trial.events if e.kind == "failpoint")
    early = TimelineEvent(
        index=0,
        t=0.0,
        source="worker:w2",
        kind="failpoint",
        fields={"point": trial.injection_point, "held": False, "file": "/x/a.py", "line": 3},
    )
    held = dataclasses.replace(
        hit, fields={**hit.fields, "held": True, "file": "/x/a.py", "line": 9}
    )
    trial = dataclasses.replace(trial, events=(early, held))
    doc = sarif_log(dataclasses.replace(results, trials=(trial,)), Path("/x"))
    assert doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 9
    }


def test_every_invariant_has_help_of_its_own() -> None:
    # A new invariant without an entry falls back to generic text, which a code-scanning
    # view shows as the whole advice: each one needs its own.
    from reports.sarif_rules import RULES

    assert [i for i in INVARIANTS if i not in RULES] == []
