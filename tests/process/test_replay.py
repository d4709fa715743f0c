"""A stored violation replays from its seed to the same verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process


def crashpoint(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_violation_replays_to_the_same_verdict(tmp_path: Path) -> None:
    first = crashpoint(
        "run",
        "--mutant",
        "timestamp_in_payload",
        "--scenario",
        "provider_error_before_commit",
        "--point",
        "fail_once",
        "--provider",
        "idempotent",
        "--seed",
        "5",
        "--out",
        str(tmp_path / "first"),
    )
    assert first.returncode == 1, first.stderr
    again = crashpoint("replay", str(tmp_path / "first" / "results.json"), "--out", str(tmp_path))
    assert again.returncode == 1, again.stderr
    assert "reproduced: violated" in again.stderr
    (trial,) = json.loads((tmp_path / "first" / "results.json").read_text())["trials"]
    replayed = json.loads((tmp_path / trial["id"] / "results.json").read_text())["trials"][0]
    assert replayed["seed"] == trial["seed"]
    assert {v["invariant"] for v in replayed["violations"]} >= {"stable_key_and_payload"}


def test_nothing_to_replay_when_everything_held(tmp_path: Path) -> None:
    ok = crashpoint(
        "run", "--scenario", "simultaneous_trigger", "--provider", "plain", "--out", str(tmp_path)
    )
    assert ok.returncode == 0, ok.stderr
    again = crashpoint("replay", str(tmp_path / "results.json"), "--out", str(tmp_path / "r"))
    assert again.returncode == 0
    assert "nothing to replay" in again.stderr


def test_unknown_trial_is_a_usage_error(tmp_path: Path) -> None:
    # A record replay can read (it is checked as `crashpoint report` checks it), empty.
    record = {"schema": "crashpoint.results/1", "run_id": "r", "target": {"name": "t"}}
    (tmp_path / "results.json").write_text(json.dumps({**record, "trials": []}))
    bad = crashpoint("replay", str(tmp_path / "results.json"), "--trial", "nope")
    assert bad.returncode == 2
    assert "no trial 'nope'" in bad.stderr
