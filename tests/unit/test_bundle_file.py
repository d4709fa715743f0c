"""crashpoint bundle: what a bundle holds, its content hash, and what a replay says
differs on this machine (the replay itself: tests/process/test_bundle.py)."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest

from harness.commands.bundle import (
    content_hash,
    differences,
    is_bundle_file,
    make_bundle,
    read_bundle,
)
from harness.contract.errors import ConfigError
from harness.contract.vocabulary import VERSION
from harness.schedule import FaultStep, Schedule, save

RUN_SMALL = Path(__file__).parents[1] / "fixtures" / "results" / "run_small.json"


def test_a_bundle_holds_the_first_violated_trial_and_a_hash_of_its_content(
    tmp_path: Path,
) -> None:
    path = make_bundle(RUN_SMALL, trial_id=None, out=tmp_path / "b.json")
    doc = json.loads(path.read_text())
    assert is_bundle_file(path)
    content = doc["content"]
    first = next(
        t for t in json.loads(RUN_SMALL.read_text())["trials"] if t["verdict"] == "violated"
    )
    assert content["trial"] == first  # its replay line, seed and whole history
    assert content["target"]["name"] == "billing-agent"
    assert set(content["versions"]) >= {"crashpoint", "python", "platform", "worker"}
    assert doc["content_hash"] == content_hash(content)
    assert read_bundle(path) == content


def test_the_hash_does_not_depend_on_key_order_or_layout() -> None:
    assert content_hash({"a": 1, "b": [1, 2]}) == content_hash({"b": [1, 2], "a": 1})
    assert content_hash({"a": 1}) != content_hash({"a": 2})


def test_a_changed_bundle_is_refused_in_one_line(tmp_path: Path) -> None:
    path = make_bundle(RUN_SMALL, trial_id=None, out=tmp_path / "b.json")
    doc = json.loads(path.read_text())
    doc["content"]["trial"]["verdict"] = "held"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="changed after it was made") as caught:
        read_bundle(path)
    assert "\n" not in str(caught.value)


def test_a_named_trial_or_none_at_all(tmp_path: Path) -> None:
    trials = json.loads(RUN_SMALL.read_text())["trials"]
    held = next(t for t in trials if t["verdict"] == "held")
    path = make_bundle(RUN_SMALL, trial_id=held["id"], out=tmp_path / "b.json")
    assert read_bundle(path)["trial"]["id"] == held["id"]
    with pytest.raises(ConfigError, match="no trial 'nope'"):
        make_bundle(RUN_SMALL, trial_id="nope", out=tmp_path / "c.json")
    doc = json.loads(RUN_SMALL.read_text())
    doc["trials"] = [held]
    only_held = tmp_path / "held.json"
    only_held.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="no violated trial to bundle"):
        make_bundle(only_held, trial_id=None, out=tmp_path / "d.json")


def test_what_differs_here_is_named(tmp_path: Path) -> None:
    path = make_bundle(RUN_SMALL, trial_id=None, out=tmp_path / "b.json")
    content = read_bundle(path)
    assert differences(content) == []
    content["versions"]["python"] = "2.7.18"
    content["versions"]["crashpoint"] = "0.0.1"
    assert differences(content) == [
        f"crashpoint: here {VERSION}, in the bundle 0.0.1",
        f"python: here {platform.python_version()}, in the bundle 2.7.18",
    ]


def test_a_finding_is_bundled_with_its_schedule(tmp_path: Path) -> None:
    finding = save(
        Schedule(
            provider="plain",
            faults=(FaultStep(at="after_external_call", action="kill"),),
            mutant="fresh_key_per_attempt",
        ),
        tmp_path / "explore" / "finding.json",
    )
    path = make_bundle(finding, trial_id=None, out=tmp_path / "b.json")
    content = read_bundle(path)
    assert content["kind"] == "finding"
    assert content["schedule"] == json.loads(finding.read_text())
    assert content["config"] is None  # the reference worker: nothing to carry
    with pytest.raises(ConfigError, match=r"--trial applies to a results\.json"):
        make_bundle(finding, trial_id="x", out=tmp_path / "c.json")
