"""child_killed: only the pool child inside the failpoint is SIGKILLed; the parent lives
on and is judged by what it does next. The reference worker in pool mode leaves the job
to be claimed again; its ack_when_child_lost mutant acknowledges it (nothing_lost). A
target that declares a pool but runs jobs in the worker itself is inconclusive, not held."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_any_worker import run_pyqueue, trials
from trialkit import describe, events, run_cell

pytestmark = pytest.mark.process

CELL = ("child_killed", "pool_child", "plain", "SIGKILL")


def test_the_child_alone_dies_and_the_parent_finishes_the_job() -> None:
    r = run_cell(*CELL)
    assert (r.verdict, r.reached) == ("held", True), describe(r)
    (start,) = events(r, "worker_start")
    (kill,) = events(r, "signal", signal="SIGKILL")
    assert kill["fields"]["pid"] != start["fields"]["pid"]  # a child, not the worker
    # The same worker claimed the job again after its lease lapsed and wrote once.
    assert {e["source"] for e in events(r, "claim", job="j-0001")} == {"worker:w1"}
    assert len(events(r, "claim", job="j-0001")) == 2
    (exit_,) = events(r, "worker_exit")
    assert exit_["t"] > kill["t"]
    assert [w["fields"]["committed"] for w in events(r, "arrival", job="j-0001")] == [True]


def test_a_parent_that_acknowledges_its_lost_child_is_caught() -> None:
    r = run_cell(*CELL, mutant="ack_when_child_lost")
    assert r.verdict == "violated", describe(r)
    assert {v.invariant for v in r.violations} == {"nothing_lost"}, describe(r)


def test_a_declared_pool_without_children_is_inconclusive(scratch: Path, tmp_path: Path) -> None:
    filters = ("--scenario", "child_killed", "--provider", "billing")
    done = run_pyqueue("crashpoint-pool-claimed.toml", scratch, tmp_path / "out", *filters)
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    (t,) = trials(tmp_path / "out")
    assert t["verdict"] == "inconclusive"
    assert "is the worker itself" in t["reason"]
