"""The results model: loading, validation errors, derived statuses, JSON round trip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.contract.errors import ConfigError
from reports import load_results, results_from_dict, results_to_dict, write_results
from reports.model import Summary

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"


def raw(name: str = "run_small.json") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return data


def test_fixture_loads_with_every_documented_field() -> None:
    results = load_results(FIXTURES / "run_small.json")
    # A run merged with a rerun of one cell: two run ids, two seeds.
    assert results.run_id == "merged-20261130T031500-5f2c+20261130T032000-8b1d"
    assert results.merged_from == ("20261130T031500-5f2c", "20261130T032000-8b1d")
    assert results.seed is None
    assert results.target.name == "billing-agent"
    assert results.environment["toxiproxy"] is None
    violated = results.trial(
        "crash_after_external_success.after_external_call.plain.SIGKILL.sqlite.process"
        "@20261130T032000-8b1d"
    )
    assert violated.verdict == "violated"
    assert [v.invariant for v in violated.violations] == [
        "no_duplicate_effect",
        "no_retry_while_unknown",
    ]
    evidence = violated.violations[0].evidence
    assert len(evidence.arrivals) == 2
    assert len(evidence.effects) == 2
    assert evidence.events == (4, 5, 7, 11, 12)
    assert violated.events[4].source == "provider:plain"
    assert violated.timings["worker_s"] == pytest.approx(0.966)


def test_summary_is_recomputed_from_trials_not_read() -> None:
    data = raw()
    data["summary"] = {"total": 999, "held": 999}
    results = results_from_dict(data)
    stored = raw()["summary"]
    assert results.summary.total == stored["total"] == 18
    assert results.summary.violated == stored["violated"]


def test_statuses_distinguish_not_reached_from_held() -> None:
    results = load_results(FIXTURES / "run_small.json")
    counts = results.status_counts
    assert counts == {
        "violated": 3,
        "inconclusive": 1,
        "not_reached": 1,
        "skipped": 2,
        "held": 11,
    }
    assert sum(counts.values()) == results.summary.total
    assert results.summary.not_reached == 1


@pytest.mark.parametrize(
    ("verdict", "reached", "status"),
    [
        ("held", True, "held"),
        ("held", False, "not_reached"),
        ("inconclusive", False, "not_reached"),
        ("inconclusive", True, "inconclusive"),
        ("skipped", False, "skipped"),
        # A violation is in provider truth whether or not the failpoint was confirmed.
        ("violated", False, "violated"),
    ],
)
def test_trial_status(verdict: str, reached: bool, status: str) -> None:
    data = raw()
    data["trials"] = [dict(data["trials"][0], verdict=verdict, reached=reached)]
    assert results_from_dict(data).trials[0].status == status


def test_round_trip_loses_nothing(tmp_path: Path) -> None:
    for name in ("run_small.json", "selftest.json"):
        first = load_results(FIXTURES / name)
        write_results(first, tmp_path / name)
        again = load_results(tmp_path / name)
        assert again == first
        assert results_to_dict(again) == results_to_dict(first)


def test_unknown_keys_survive_a_round_trip(tmp_path: Path) -> None:
    data = raw()
    data["shard"] = "1/2"
    data["trials"][0]["worker_log"] = "tail of stderr"
    data["trials"][7]["violations"][0]["evidence"]["proxy"] = {"toxics": []}
    out = results_to_dict(results_from_dict(data))
    assert out["shard"] == "1/2"
    assert out["trials"][0]["worker_log"] == "tail of stderr"
    assert out["trials"][7]["violations"][0]["evidence"]["proxy"] == {"toxics": []}


def test_summary_of_empty() -> None:
    assert Summary.of([]) == Summary()


def _set(path: list[str | int], value: object) -> dict[str, Any]:
    data = raw()
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (["schema"], "crashpoint.results/0", "schema: expected 'crashpoint.results/1'"),
        (["run_id"], _DELETE, "run_id: required key is missing"),
        (["target"], "reference", 'target: expected an object, got "reference"'),
        (["trials"], {"a": 1}, "trials: expected an array"),
        (["trials", 2, "verdict"], "passed", "trials[2].verdict: expected one of held,"),
        (["trials", 0, "reached"], 1, "trials[0].reached: expected true or false, got 1"),
        (["trials", 0, "duration_s"], "1.2", 'trials[0].duration_s: expected a number, got "1.2"'),
        (["trials", 0, "replay"], _DELETE, "trials[0].replay: required key is missing"),
        (["trials", 1, "events", 3, "t"], "1", "trials[1].events[3].t: expected a number"),
        (["trials", 1, "events", 0], [], "trials[1].events[0]: expected an object, got []"),
        (
            ["trials", 7, "violations", 0, "evidence", "events", 0],
            99,
            "trials[7].violations[0].evidence.events[0]: event index 99 is outside",
        ),
        (["environment", "docker"], {"v": 1}, "environment.docker: expected a version string"),
        (["kill_matrix"], {"mutants": {"m": {"by": []}}}, "kill_matrix.mutants.m.killed"),
        (
            ["trials", 1, "id"],
            "crash_before_external_call.before_external_call.idempotent.SIGKILL.sqlite.process",
            "trials[1].id: duplicate trial id",
        ),
    ],
)
def test_malformed_input_names_file_key_and_value(
    tmp_path: Path, path: list[str | int], value: object, expected: str
) -> None:
    target = tmp_path / "bad-results.json"
    target.write_text(json.dumps(_set(path, value)), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_results(target)
    message = str(info.value)
    assert message.startswith(f"{target}: ")
    assert expected in message
    assert "\n" not in message


def test_not_json_and_missing_file(tmp_path: Path) -> None:
    broken = tmp_path / "results.json"
    broken.write_text('{"schema": ', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"results\.json: not valid JSON \(line 1 column 12"):
        load_results(broken)
    with pytest.raises(ConfigError, match=r"nope\.json: cannot read results"):
        load_results(tmp_path / "nope.json")
    with pytest.raises(ConfigError, match=r"results: expected an object, got \[\]"):
        results_from_dict([])


def test_lenient_where_the_data_is_still_meaningful() -> None:
    data = raw()
    data["environment"]["postgres"] = 15
    data["trials"][0]["events"][0]["t"] = -0.002
    results = results_from_dict(data)
    assert results.environment["postgres"] == "15"
    assert results.trials[0].events[0].t == -0.002


def test_a_trial_name_drops_the_scenario_and_keeps_the_mutant() -> None:
    selftest = load_results(FIXTURES / "selftest.json")
    names = {t.id: t.name for t in selftest.trials}
    correct = "crash_after_external_success.after_external_call.idempotent.SIGKILL.sqlite.process"
    assert names[correct] == "after_external_call.idempotent.SIGKILL.sqlite.process"
    assert names[f"fresh_key_per_attempt.{correct}"] == (
        "fresh_key_per_attempt.after_external_call.idempotent.SIGKILL.sqlite.process"
    )


def test_every_event_kind_has_a_colour_group() -> None:
    from harness.contract.vocabulary import EventKind
    from reports.timeline import GROUP_LABELS, KIND_GROUPS

    assert set(KIND_GROUPS) == set(EventKind)
    assert set(KIND_GROUPS.values()) <= set(GROUP_LABELS)
