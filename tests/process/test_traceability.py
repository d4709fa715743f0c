"""Traceability with real workers and providers: every effect's record id reaches the
trace rows and the worker's own record; a worker that does not keep it gets the
untraced_effect warning, which fails the gate only with --fail-on-warning; every job that
ends in needs_review reaches the review rows with its evidence."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from clikit import ROOT, results, run

pytestmark = pytest.mark.process

PYQUEUE = ROOT / "tests" / "process" / "workers" / "pyqueue"


def _commits(trial: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in trial["events"] if e["kind"] == "commit"]


def _untraced(trial: dict[str, Any]) -> list[dict[str, Any]]:
    return [w for w in trial["warnings"] if w["warning"] == "untraced_effect"]


def test_the_reference_worker_keeps_every_record_id_and_fills_the_review_desk(
    scratch: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    done = run(
        [
            "--scenario",
            "crash_after_external_success",
            "--scenario",
            "crash_during_external_call",
            "--signal",
            "SIGKILL",
            "--seed",
            "5",
            "--out",
            str(out),
            "--fail-on-warning",
        ],
        scratch,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    doc = results(out)
    trials = doc["trials"]
    assert {t["provider"] for t in trials} == {"idempotent", "plain", "unqueryable"}
    desk = 0
    for t in trials:
        assert t["verdict"] == "held", t["id"]
        assert _untraced(t) == [], t["id"]
        commits = _commits(t)
        assert commits, t["id"]
        # One trace row per committed effect, naming the commit and its record id.
        assert sorted(r["event"] for r in t["trace"]) == [
            i for i, e in enumerate(t["events"]) if e["kind"] == "commit"
        ]
        made: dict[str, set[str]] = defaultdict(set)
        for row in t["trace"]:
            commit = t["events"][row["event"]]
            assert row["external_id"] == commit["fields"]["external_id"]
            assert row["external_id"].startswith("rec_svc_")
            assert row["job"] == commit["job"]
            assert isinstance(row["attempt"], int)
            assert row["idempotency_key"] or row["client_marker"]
            made[row["job"]].add(row["external_id"])
        review_jobs = {r["job"] for r in t["review"]}
        for row in t["trace"]:
            if row["job"] not in review_jobs:
                # A job the worker closed keeps the record of one of its own effects.
                assert row["recorded_ref"] in made[row["job"]], (t["id"], row)
        if t["provider"] == "unqueryable":
            # The crashed job cannot be reconciled there: the desk has it, with evidence.
            assert review_jobs, t["id"]
        for r in t["review"]:
            assert r["idempotency_key"]
            assert r["action"].startswith("POST /v1/")
            assert r["at_wall"]
            assert t["events"][r["at_event"]]["kind"] == "arrival"
            assert t["events"][r["at_event"]]["job"] == r["job"]
            assert r["last_error"]
            assert r["review_reason"]
            assert r["external_state"]
        desk += len(t["review"])
    assert desk > 0
    assert doc["summary"]["needs_review"] == desk
    assert f"Review desk: {desk} " in (out / "summary.md").read_text(encoding="utf-8")
    assert (out / "review.html").is_file()


def test_a_worker_that_does_not_keep_the_record_id_is_warned_and_gated_on_request(
    scratch: Path, tmp_path: Path
) -> None:
    filters = ["--scenario", "crash_after_external_success", "--signal", "SIGKILL", "--seed", "3"]
    config = ["-c", str(PYQUEUE / "crashpoint-no-external-ref.toml")]
    out = tmp_path / "out"
    done = run([*config, *filters, "--out", str(out)], scratch)
    assert done.returncode == 0, done.stdout + done.stderr
    trials = results(out)["trials"]
    assert {t["provider_name"] for t in trials} == {"billing", "mailer"}
    for t in trials:
        assert t["verdict"] == "held", t["id"]
        warned = _untraced(t)
        assert {w["job"] for w in warned} == {"j-0001", "j-0002"}, t["id"]
        for w in warned:
            assert "kept no external reference" in w["message"]
            ids = {e["external_id"] for e in w["evidence"]["effects"]}
            assert ids == {r["external_id"] for r in t["trace"] if r["job"] == w["job"]}, w
        assert all(r["recorded_ref"] is None for r in t["trace"])
    gated = run([*config, *filters, "--out", str(tmp_path / "gated"), "--fail-on-warning"], scratch)
    assert gated.returncode == 1, gated.stdout + gated.stderr

    # The same worker with its status line whole: every done job names its record.
    whole = tmp_path / "whole"
    done = run(["-c", str(PYQUEUE / "crashpoint.toml"), *filters, "--out", str(whole)], scratch)
    assert done.returncode == 0, done.stdout + done.stderr
    for t in results(whole)["trials"]:
        assert _untraced(t) == [], t["id"]
        assert all(r["recorded_ref"] for r in t["trace"]), t["trace"]
