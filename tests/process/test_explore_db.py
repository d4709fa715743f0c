"""explore across shards: with one --db (CRASHPOINT_EXPLORE_DB) for all, what one shard
found the others replay first, so a shard with a budget too small to find the bug on
its own finds it too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

MUTANT = "fresh_key_per_attempt"


def explore(out: Path, *args: str, db: Path | None = None) -> int:
    env = {k: v for k, v in os.environ.items() if k != "CRASHPOINT_EXPLORE_DB"}
    if db is not None:
        env["CRASHPOINT_EXPLORE_DB"] = str(db)
    argv = [sys.executable, "-m", "harness", "explore", "--mutant", MUTANT, "--out", str(out)]
    done = subprocess.run(
        [*argv, "--confirm", "2/2", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    return done.returncode


def faults(finding: Path) -> object:
    return json.loads(finding.read_text())["faults"]


def test_a_shard_replays_what_another_found_in_the_shared_database(tmp_path: Path) -> None:
    db = tmp_path / "shared"
    small = ("--budget", "1", "--seed", "99", "--shrink-budget", "0")
    # Alone, one schedule of this seed does not find the bug.
    assert explore(tmp_path / "alone", *small) == 0
    first = tmp_path / "first"
    assert explore(first, "--budget", "8", "--seed", "1", "--shrink-budget", "4", db=db) == 1
    assert any(db.rglob("*")), "the finding went to the shared database"
    assert not (first / ".hypothesis").exists()
    # The same small shard, given the database by the flag: the stored finding comes first.
    second = tmp_path / "second"
    assert explore(second, *small, "--db", str(db)) == 1
    assert faults(second / "finding.json") == faults(first / "finding.json")
