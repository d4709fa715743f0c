"""``crashpoint run`` beside a ``crashpoint.toml`` tests the worker it declares.

It used to run the built-in reference worker, name the trials after the reference's
providers and exit 0, never saying which target it had tested.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from clikit import ROOT, results, run

from harness.pytest_plugin import missing

pytestmark = pytest.mark.process

EXAMPLE = ROOT / "examples" / "node-worker"
CELL = ["--scenario", "crash_before_external_call", "--provider", "billing", "--signal", "SIGKILL"]


def test_run_beside_a_crashpoint_toml_tests_that_worker(
    pytestconfig: pytest.Config, scratch: Path, tmp_path: Path
) -> None:
    if shutil.which("node") is None:
        missing(pytestconfig, "node (Node.js) for examples/node-worker")
    work = tmp_path / "worker"
    shutil.copytree(EXAMPLE, work)
    out = tmp_path / "out"
    done = run([*CELL, "--seed", "3", "--out", str(out)], scratch, cwd=work)
    assert done.returncode == 0, done.stderr
    first = done.stderr.splitlines()[0]
    assert first == f"target: node-billing-worker ({work / 'crashpoint.toml'}, found here)"
    doc = results(out)
    assert doc["target"]["name"] == "node-billing-worker"
    assert {t["provider_name"] for t in doc["trials"]} == {"billing"}


def test_the_reference_worker_is_said_so_where_nothing_is_declared(
    scratch: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    cell = ["--scenario", "crash_before_external_call", "--provider", "idempotent"]
    done = run([*cell, "--signal", "SIGKILL", "--out", str(out)], scratch, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        f"target: reference (built in: no crashpoint.toml or [tool.crashpoint] in {tmp_path})"
    )
    assert results(out)["target"]["name"] == "reference"
    # Named on purpose, it says how.
    again = run([*cell, "--target", "reference", "--out", str(out)], scratch, cwd=EXAMPLE)
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines()[0] == "target: reference (--target reference)"
