"""The transactional outbox with real processes: the reference worker in outbox mode, a
relay as a second process kind, killed after the provider took its message and before
the row was marked sent. The correct relay resends under the outbox id and the provider
replays; a relay that sends no outbox id makes a second effect, and selftest's kill
matrix says so."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from clikit import ROOT, cli, results, run

pytestmark = pytest.mark.process

SCENARIO = ["--scenario", "relay_crash_after_send"]
REPEATS = 10


def _writes(trial: dict[str, Any], job: str) -> list[dict[str, Any]]:
    return [e for e in trial["events"] if e["kind"] == "arrival" and e["job"] == job]


def test_the_correct_relay_resends_under_the_outbox_id_every_time(
    scratch: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = [*SCENARIO, "--signal", "SIGKILL", "--repeat", str(REPEATS), "-j", "2"]
    done = run([*args, "--seed", "21", "--out", str(out)], scratch, timeout_s=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = sorted(out.glob("run-*/results.json"))
    assert len(runs) == REPEATS
    for path in runs:
        [trial] = results(path.parent)["trials"]
        assert trial["verdict"] == "held", (path, trial["reason"], trial["violations"])
        assert trial["reached"]
        assert trial["reached_by"] == "failpoint"
        lanes = {e["source"] for e in trial["events"]}
        # The relay is a process kind of its own, in lanes of its own: r1 killed, r2 after.
        assert {"worker:w1", "worker:r1", "worker:r2"} <= lanes
        hits = [
            (e["source"], e["job"])
            for e in trial["events"]
            if e["kind"] == "failpoint" and e["fields"]["point"] == "after_relay_send"
        ]
        # r1 stopped at the boundary with j-0001's answer in hand; r2 sent the rest.
        assert hits[0] == ("worker:r1", "j-0001")
        assert {source for source, _ in hits[1:]} == {"worker:r2"}
        killed = [e for e in trial["events"] if e["kind"] == "signal"]
        assert [e["fields"]["worker"] for e in killed] == ["r1"]
        commits = Counter(e["job"] for e in trial["events"] if e["kind"] == "commit")
        assert commits == {"j-0001": 1, "j-0002": 1}
        first = _writes(trial, "j-0001")
        # Sent again after the crash, under the outbox id, and replayed by the provider.
        assert [w["fields"]["idempotency_key"] for w in first] == ["outbox-j-0001"] * 2
        assert [w["fields"]["replayed"] for w in first] == [False, True]
        assert {w["fields"]["worker_id"] for w in first} == {"r1", "r2"}
        # The relay acknowledged each job with the provider's record id.
        assert trial["warnings"] == []
        assert {r["recorded_ref"] for r in trial["trace"]} == {
            r["external_id"] for r in trial["trace"]
        }


def test_selftest_kills_the_relay_that_sends_no_outbox_id(scratch: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["selftest", *SCENARIO, "--signal", "SIGKILL", "--seed", "4", "-j", "2"]
    subprocess.run(
        [*cli(), *args, "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(scratch)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    doc = results(out)
    matrix = doc["kill_matrix"]
    assert matrix["correct_worker"]["violations"] == 0, matrix["correct_worker"]
    assert matrix["correct_worker"]["inconclusive"] == 0, matrix["correct_worker"]
    row = matrix["mutants"]["relay_without_key"]
    assert row["killed"], row
    assert row["caught_as_expected"], row
    assert row["expected_scenario"] == "relay_crash_after_send"
    assert "no_duplicate_effect" in row["invariants"]
    assert row["by"] == [
        "relay_without_key.relay_crash_after_send.after_relay_send.idempotent.SIGKILL.sqlite.process"
    ]
    killer = next(t for t in doc["trials"] if t["id"] == row["by"][0])
    keys = {w["fields"]["idempotency_key"] for w in _writes(killer, "j-0001")}
    assert len(keys) == 2
    assert "outbox-j-0001" not in keys
    # The kill matrix page and the summary show the row.
    assert "relay_without_key" in (out / "kill-matrix.html").read_text(encoding="utf-8")
    assert "`relay_without_key` | ✅ killed" in (out / "summary.md").read_text(encoding="utf-8")


PYSTEPS = ROOT / "tests" / "process" / "workers" / "pysteps"


def _relay_trials(toml: str, scratch: Path, out: Path) -> dict[str, dict[str, Any]]:
    args = ["-c", str(PYSTEPS / toml), *SCENARIO, "--seed", "5", "--out", str(out)]
    done = run(args, scratch)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    doc = results(out)
    assert doc["not_applicable"] == []
    return {t["signal"]: t for t in doc["trials"]}


def test_a_command_target_that_declares_a_relay_runs_the_relay_row(
    scratch: Path, tmp_path: Path
) -> None:
    # [target] relay: the row applies, its kill lands in the declared relay process.
    correct = _relay_trials("crashpoint-relay.toml", scratch, tmp_path / "correct")
    assert set(correct) == {"SIGKILL", "SIGTERM"}
    killed = correct["SIGKILL"]
    assert (killed["verdict"], killed["reached_by"]) == ("held", "failpoint"), killed["reason"]
    held = [e for e in killed["events"] if e["kind"] == "failpoint" and e["fields"]["held"]]
    assert [(e["source"], e["fields"]["point"]) for e in held] == [
        ("worker:r1", "after_relay_send")
    ]
    # The same relay that sends without its key is caught there.
    buggy = _relay_trials("crashpoint-relay-buggy.toml", scratch, tmp_path / "buggy")
    assert buggy["SIGKILL"]["verdict"] == "violated"
    assert "no_duplicate_effect" in {v["invariant"] for v in buggy["SIGKILL"]["violations"]}
