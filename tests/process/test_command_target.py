"""``crashpoint run -c crashpoint.toml`` against a worker in another language.

The worker under test is ``examples/node-worker``: Node.js, standard library only, a file
queue in the trial's state directory, the failpoint protocol in twenty lines. The real
CLI runs in a subprocess, so configuration loading, enqueue, worker start, kills,
quiescence without a ledger, the oracle and the exit code are all the shipped ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from harness.pytest_plugin import missing

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "node-worker"
CLI_TIMEOUT_S = 120


def cli() -> list[str]:
    """This interpreter's ``crashpoint`` entry point, or the same ``main`` run by it."""
    beside = Path(sys.executable).with_name("crashpoint")
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())"]


@pytest.fixture
def node(pytestconfig: pytest.Config) -> str:
    found = shutil.which("node")
    if found is None:
        missing(pytestconfig, "node (Node.js) for examples/node-worker")
    assert found is not None
    return found


@pytest.fixture
def scratch() -> Iterator[Path]:
    """The run's TMPDIR: trial directories land here (short, for the failpoint socket)."""
    path = Path(tempfile.mkdtemp(prefix="cpn-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run(args: list[str], scratch: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(scratch)}
    return subprocess.run(
        [*cli(), "run", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


def leftovers(scratch: Path) -> list[str]:
    """Processes that still live in (or were started for) this run's trial directories."""
    out = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            where = proc.cwd()
            state = proc.environ().get("CRASHPOINT_STATE_DIR", "")
            if where.startswith(str(scratch)) or state.startswith(str(scratch)):
                out.append(f"{proc.pid} {' '.join(proc.info['cmdline'] or [])}")
    return out


def results(out: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((out / "results.json").read_text())
    return doc


def test_node_worker_holds_crashes_at_the_boundaries(
    node: str, scratch: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    done = run(
        [
            "-c",
            str(EXAMPLE / "crashpoint.toml"),
            "--scenario",
            "crash_after_external_success",
            "--scenario",
            "crash_before_external_call",
            "--signal",
            "SIGKILL",
            "--out",
            str(out),
            "--seed",
            "7",
        ],
        scratch,
    )
    assert done.returncode == 0, done.stderr
    assert leftovers(scratch) == []
    doc = results(out)
    assert doc["target"]["kind"] == "command"
    assert doc["target"]["name"] == "node-billing-worker"
    assert doc["seed"] == 7
    trials = {t["scenario"]: t for t in doc["trials"]}
    assert set(trials) == {"crash_after_external_success", "crash_before_external_call"}
    for t in trials.values():
        assert (t["verdict"], t["reached"], t["violations"]) == ("held", True, []), t["reason"]
        assert (t["provider"], t["signal"]) == ("idempotent", "SIGKILL")
        # Killed workers died of SIGKILL; the rest left on the harness's SIGTERM, cleanly.
        exits = {e["fields"]["status"] for e in t["events"] if e["kind"] == "worker_exit"}
        assert exits <= {"killed by SIGKILL", "exit 0"}, exits

    events = trials["crash_after_external_success"]["events"]
    held = [e for e in events if e["kind"] == "failpoint" and e["fields"]["held"]]
    assert [(e["fields"]["point"], e["job"], e["attempt"]) for e in held] == [
        ("after_external_call", "j-0001", 1)
    ]
    # The effect was committed before the kill; recovery confirmed it by key, never re-sent.
    j1 = [e for e in events if e["job"] == "j-0001" and e["source"] == "provider:billing"]
    assert [(e["kind"], e["fields"]["idempotency_key"]) for e in j1] == [
        ("arrival", "effect-j-0001"),
        ("commit", "effect-j-0001"),
        ("reconcile", "effect-j-0001"),
    ]


def test_node_worker_with_a_fresh_key_per_attempt_is_caught(
    node: str, scratch: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    done = run(
        [
            "-c",
            str(EXAMPLE / "crashpoint-buggy.toml"),
            "--scenario",
            "crash_after_external_success",
            "--signal",
            "SIGKILL",
            "--out",
            str(out),
            "--seed",
            "7",
        ],
        scratch,
    )
    assert done.returncode == 1, done.stderr
    assert leftovers(scratch) == []
    (trial,) = results(out)["trials"]
    assert (trial["verdict"], trial["reached"]) == ("violated", True)
    broken = {v["invariant"] for v in trial["violations"]}
    assert broken & {"no_duplicate_effect", "stable_key_and_payload"}, broken
    assert {v["job"] for v in trial["violations"]} == {"j-0001"}
    assert "crashpoint-buggy.toml" in trial["replay"]


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (("lease_ttl_s = 0.5", "lease_tll_s = 0.5"), "target.lease_tll_s"),
        (("workers = 2", 'workers = "two"'), "target.workers"),
        (('kind = "idempotent"', 'kind = "exactly-once"'), "providers[0].kind"),
    ],
    ids=["misspelt-key", "bad-type", "unknown-kind"],
)
def test_bad_crashpoint_toml_is_one_line_and_exit_2(
    edit: tuple[str, str], key: str, scratch: Path, tmp_path: Path
) -> None:
    good = (EXAMPLE / "crashpoint.toml").read_text()
    assert edit[0] in good
    config = tmp_path / "crashpoint.toml"
    config.write_text(good.replace(edit[0], edit[1]))
    done = run(["-c", str(config), "--out", str(tmp_path / "out")], scratch)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(config) in lines[0]
    assert key in lines[0]
    assert not (tmp_path / "out" / "results.json").exists()
