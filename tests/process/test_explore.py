"""Exploration end to end on real trials, kept small for CI: one mutant, a tiny budget.

The explorer finds the planted bug, shrinks it, saves the schedule and a regression test;
replaying the schedule reproduces the violation on the mutant and holds on the correct
worker; the exported test fails on the mutant and passes on the correct worker; recheck
judges the stored histories again to the same verdicts. A worker with two bugs gives two
findings, one per set of invariants broken, each saved, shrunk and replayable on its own;
a replay plays a finding five times by default and gives the rate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.schedule import load

pytestmark = pytest.mark.process

MUTANT = "ack_before_effect"


def crashpoint(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def explored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("explore")
    ran = crashpoint(
        "explore",
        *("--budget", "3", "--seed", "1", "--mutant", MUTANT),
        *("--confirm", "2/2", "--shrink-budget", "4", "--out", str(out)),
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    return out


def test_explore_finds_and_shrinks_the_planted_bug(explored: Path) -> None:
    schedule = load(explored / "finding.json")
    assert schedule.mutant == MUTANT
    assert 1 <= len(schedule.faults) <= 3
    doc = json.loads((explored / "results.json").read_text())
    section = doc["exploration"]
    assert section["finding"]["status"] == "failing"
    assert "nothing_lost" in section["finding"]["invariants"]
    assert section["examples_needed"] <= 3
    # Every trial keeps its schedule and the oracle's facts.
    assert all("schedule" in t and t["facts"] is not None for t in doc["trials"])
    assert (explored / "exploration.html").exists()


def test_replay_reproduces_on_the_mutant_and_holds_on_the_correct_worker(
    explored: Path, tmp_path: Path
) -> None:
    finding = str(explored / "finding.json")
    again = crashpoint("replay", finding, "--repeat", "2", "--out", str(tmp_path / "bug"))
    assert again.returncode == 1, again.stdout + again.stderr
    assert "reproduced 2/2" in again.stderr
    fixed = crashpoint(
        "replay", finding, "--correct", "--repeat", "2", "--out", str(tmp_path / "fixed")
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "reproduced 0/2: the finding did not reproduce in 2 tries" in fixed.stderr


def test_the_exported_regression_test_fails_on_the_mutant_only(
    explored: Path, tmp_path: Path
) -> None:
    test = explored / "test_crashpoint_finding.py"

    def pytest_run(mutant: str | None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "CRASHPOINT_MUTANT"}
        if mutant:
            env["CRASHPOINT_MUTANT"] = mutant
        out = tmp_path / (mutant or "correct")
        return subprocess.run(
            [
                *(sys.executable, "-m", "pytest", str(test), "-q", "-p", "no:cacheprovider"),
                *("--crashpoint-config", "reference", "--crashpoint-out", str(out)),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            cwd=explored,
            env=env,
        )

    buggy = pytest_run(MUTANT)
    assert buggy.returncode == 1, buggy.stdout
    assert "nothing_lost" in buggy.stdout
    correct = pytest_run(None)
    assert correct.returncode == 0, correct.stdout


def test_recheck_judges_the_stored_histories_to_the_same_verdicts(explored: Path) -> None:
    again = crashpoint("recheck", str(explored / "results.json"))
    assert again.returncode == 1, again.stdout + again.stderr
    assert "no verdict changes" in again.stderr


def test_replay_of_the_results_plays_a_trial_s_own_schedule(explored: Path, tmp_path: Path) -> None:
    doc = json.loads((explored / "results.json").read_text())
    [trial_id] = doc["exploration"]["finding"]["trials"][:1]
    again = crashpoint(
        "replay", str(explored / "results.json"), "--trial", trial_id, "--out", str(tmp_path)
    )
    assert again.returncode == 1, again.stdout + again.stderr
    assert "reproduced: violated (was violated)" in again.stderr
    assert (tmp_path / f"{trial_id}.json").exists()


#: Two bugs in one: a key derived from the attempt makes every retry's key new (a failing
#: write and its retry: stable_key_and_payload) and, when a stop past the lease hands the
#: job to another worker, a second effect too. This seed draws both within 8 examples.
TWO_BUGS = ("--mutant", "fresh_key_per_attempt", "--seed", "5", "--budget", "8")


@pytest.fixture(scope="module")
def two_findings(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("explore-two")
    ran = crashpoint(
        "explore",
        *TWO_BUGS,
        *("--confirm", "1/1", "--shrink-budget", "2", "--out", str(out)),
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    return out, ran.stderr


def test_each_set_of_invariants_broken_is_its_own_finding(two_findings: tuple[Path, str]) -> None:
    out, said = two_findings
    section = json.loads((out / "results.json").read_text())["exploration"]
    findings = section["findings"]
    assert len(findings) >= 2, said
    kinds = [tuple(f["kind"]) for f in findings]
    assert len(set(kinds)) == len(kinds), kinds
    assert ("stable_key_and_payload",) in kinds
    # The first where it always was; the others numbered, each with its regression test.
    assert section["finding"] == findings[0]
    assert [f["file"] for f in findings[:2]] == ["finding.json", "finding-2.json"]
    assert findings[1]["regression_test"] == "test_crashpoint_finding_2.py"
    for f in findings:
        schedule = load(out / f["file"])
        assert schedule.mutant == "fresh_key_per_attempt"
        assert sorted(f["invariants"]) == list(f["kind"])
        assert (out / f["regression_test"]).exists()
        assert f"replay: crashpoint replay {out / f['file']}" in said
    assert "2 findings" in said or f"{len(findings)} findings" in said
    assert "finding-2.json" in (out / "exploration.html").read_text()


def test_a_replay_plays_five_times_by_default_and_gives_the_rate(
    two_findings: tuple[Path, str], tmp_path: Path
) -> None:
    out, _ = two_findings
    findings = json.loads((out / "results.json").read_text())["exploration"]["findings"]
    # The failing write retried under a new key: no timing in it, every try reproduces.
    plain = next(f for f in findings if f["kind"] == ["stable_key_and_payload"])
    again = crashpoint("replay", str(out / plain["file"]), "--out", str(tmp_path / "bug"))
    assert again.returncode == 1, again.stdout + again.stderr
    assert "x5 against reference with mutant fresh_key_per_attempt" in again.stderr
    assert "reproduced 5/5 (100%): the finding reproduces" in again.stderr, again.stderr
    replay_of = json.loads((tmp_path / "bug" / "results.json").read_text())["replay_of"]
    assert (replay_of["repeat"], replay_of["reproduced"]) == (5, "5/5")
