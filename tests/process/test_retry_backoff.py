"""retry_backoff on a third-party worker: a declared least backoff is judged from the
providers' arrivals, and an undeclared one is reported as the intervals seen, never
judged. The worker is tests/process/workers/pyqueue (its first retry waits 0.02 s)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clikit import results
from test_any_worker import explain, run_pyqueue, trials

pytestmark = pytest.mark.process

ROW = ("--scenario", "retry_backoff", "--provider", "billing")


def test_a_worker_that_waits_what_it_declares_holds(scratch: Path, tmp_path: Path) -> None:
    done = run_pyqueue("crashpoint.toml", scratch, tmp_path / "out", *ROW)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (t,) = trials(tmp_path / "out")
    assert (t["verdict"], t["reached"], t["reached_by"]) == ("held", True, "provider"), explain(t)
    assert "min_backoff" not in t["unjudged"]  # declared, so judged
    refused = [e for e in t["events"] if e["kind"] == "arrival" and e["fields"]["status"] == 503]
    assert len(refused) == 3  # the row made the retries it judges


def test_a_worker_that_retries_faster_than_it_declares_is_caught(
    scratch: Path, tmp_path: Path
) -> None:
    done = run_pyqueue("crashpoint-backoff-overstated.toml", scratch, tmp_path / "out", *ROW)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    (t,) = trials(tmp_path / "out")
    assert t["verdict"] == "violated", explain(t)
    assert {v["invariant"] for v in t["violations"]} == {"min_backoff"}, explain(t)


def test_without_a_declaration_the_intervals_are_reported_not_judged(
    scratch: Path, tmp_path: Path
) -> None:
    done = run_pyqueue("crashpoint-no-status.toml", scratch, tmp_path / "out", *ROW)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (t,) = trials(tmp_path / "out")
    assert t["verdict"] == "held", explain(t)
    note = t["unjudged"]["min_backoff"]
    assert "retry intervals after a refused write: j-0001 at billing:" in note
    assert "declare [target] min_backoff_s" in note
    assert results(tmp_path / "out")["summary"]["violated"] == 0
