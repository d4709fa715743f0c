"""``crashpoint run -c crashpoint.toml`` against a worker in another language.

The worker under test is ``examples/node-worker``: Node.js, standard library only, a file
queue in the trial's state directory, the failpoint protocol in twenty lines. The real
CLI runs in a subprocess, so configuration loading, enqueue, worker start, kills,
quiescence without a ledger, the oracle and the exit code are all the shipped ones.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from clikit import ROOT, leftovers, results, run

from harness.contract.errors import ConfigError
from harness.pytest_plugin import missing
from harness.targets.command import CommandAdapter
from harness.targets.config import JobStatus, load_config

pytestmark = pytest.mark.process

EXAMPLE = ROOT / "examples" / "node-worker"


@pytest.fixture
def node(pytestconfig: pytest.Config) -> str:
    found = shutil.which("node")
    if found is None:
        missing(pytestconfig, "node (Node.js) for examples/node-worker")
    assert found is not None
    return found


def test_node_worker_holds_crashes_at_the_boundaries(
    node: str, scratch: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    done = run(
        [
            "-c",
            str(EXAMPLE / "crashpoint.toml"),
            # The billing provider's cells (the mailer has cells of its own).
            "--provider",
            "billing",
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
            # The billing provider's cells (the mailer has cells of its own).
            "--provider",
            "billing",
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


# -- the user's enqueue and status commands, run by the adapter ---------------------------

ENQUEUE_PY = """
import json, os, sys
job, payload = sys.argv[1], sys.argv[2]
if os.environ.get("QUEUE_FULL"):
    sys.stderr.write("queue is full\\nsecond line\\n")
    sys.exit(3)
os.makedirs("queue", exist_ok=True)
with open(os.path.join("queue", job), "w") as f:
    json.dump(json.load(open(payload)), f)
"""

STATUS_PY = """
import json, os, sys
job = sys.argv[1]
if os.environ.get("STATUS_GARBAGE"):
    sys.stderr.write("warning: cache cold\\n")
    print("ok, " + job)
    sys.exit(0)
print(json.dumps({
    "state": "done" if os.path.exists(os.path.join("queue", job)) else "pending",
    "attempts": int(os.environ["CRASHPOINT_MAX_ATTEMPTS"]),
    "external_ref": os.environ.get("CRASHPOINT_FAILPOINTS", "no-failpoints"),
    "last_error": os.getcwd(),
}))
"""


def adapter_for(tmp_path: Path, *, status: bool = True, **env: str) -> CommandAdapter:
    """An adapter over Python enqueue/status scripts beside the config, attached as a
    trial attaches it (with a failpoint socket in the environment)."""
    (tmp_path / "enqueue.py").write_text(ENQUEUE_PY)
    (tmp_path / "status.py").write_text(STATUS_PY)
    py = json.dumps(sys.executable)
    config = tmp_path / "crashpoint.toml"
    config.write_text(
        "[target]\n"
        'name = "py"\n'
        f'command = [{py}, "worker.py"]\n'
        f'enqueue = [{py}, "enqueue.py", "{{job_id}}", "{{payload_file}}"]\n'
        + (f'status = [{py}, "status.py", "{{job_id}}"]\n' if status else "")
        + "max_attempts = 6\n"
        '[[providers]]\nname = "billing"\nkind = "idempotent"\n'
    )
    trial = tmp_path / "trial"
    trial.mkdir()
    adapter = CommandAdapter(load_config(config), trial_dir=trial)
    adapter.setup()
    adapter.attach_providers(
        [], {**os.environ, **env, "CRASHPOINT_FAILPOINTS": str(tmp_path / "fp.sock")}
    )
    return adapter


def test_job_status_runs_the_status_command_with_the_workers_environment(
    tmp_path: Path,
) -> None:
    adapter = adapter_for(tmp_path)
    env = adapter.worker_env("w1", mutant=None, lease_ttl_s=0.5, http_timeout_s=0.5)
    # The worker declared its own cap: it is told that one, and the oracle holds it to it.
    assert env["CRASHPOINT_MAX_ATTEMPTS"] == "6"
    assert adapter.max_attempts == 6
    # Its own state directory, apart from the harness's files in the trial's directory.
    assert env["CRASHPOINT_STATE_DIR"] == str(tmp_path / "trial" / "state")
    assert adapter.job_status("j-0001") == JobStatus(
        "pending", attempts=6, external_ref="no-failpoints", last_error=str(adapter.state_dir)
    )
    adapter.enqueue("j-0001", "billing", {"job_id": "j-0001"})
    assert json.loads((adapter.state_dir / "queue" / "j-0001").read_text())["body"] == {
        "job_id": "j-0001"
    }
    status = adapter.job_status("j-0001")
    assert status is not None
    assert (status.state, status.final) == ("done", True)


def test_job_status_is_none_without_a_status_command(tmp_path: Path) -> None:
    adapter = adapter_for(tmp_path, status=False)
    assert adapter.job_status("j-0001") is None
    assert adapter.job_states(["j-0001"]) is None


def test_job_states_read_the_status_command_as_end_states(tmp_path: Path) -> None:
    adapter = adapter_for(tmp_path)
    adapter.worker_env("w1", mutant=None, lease_ttl_s=0.5, http_timeout_s=0.5)
    states = adapter.job_states(["j-0001"])
    assert states is not None
    assert (states["j-0001"].final, states["j-0001"].delivery_state) == (False, "pending")
    adapter.enqueue("j-0001", "billing", {"job_id": "j-0001"})
    states = adapter.job_states(["j-0001"])
    assert states is not None
    done = states["j-0001"]
    assert (done.final, done.delivery_state, done.attempts) == (True, "acknowledged", 6)


def test_without_max_attempts_the_worker_is_told_no_cap(tmp_path: Path) -> None:
    adapter = adapter_for(tmp_path)
    adapter.config = replace(adapter.config, max_attempts=None)
    adapter.max_attempts = None
    env = adapter.worker_env("w1", mutant=None, lease_ttl_s=0.5, http_timeout_s=0.5)
    assert "CRASHPOINT_MAX_ATTEMPTS" not in env


def test_a_snapshot_restores_the_state_directory_with_its_sqlite_wal(tmp_path: Path) -> None:
    import sqlite3

    adapter = adapter_for(tmp_path)
    db = adapter.state_dir / "queue.db"

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(db)
        conn.execute("PRAGMA journal_mode=WAL")
        return conn

    conn = connect()
    conn.execute("CREATE TABLE jobs (id TEXT PRIMARY KEY, state TEXT)")
    conn.execute("INSERT INTO jobs VALUES ('j-0001', 'queued')")
    conn.commit()
    conn.close()
    snapshot = adapter.snapshot()
    conn = connect()
    conn.execute("PRAGMA wal_autocheckpoint=0")  # the change stays in the -wal file
    conn.execute("UPDATE jobs SET state = 'done'")
    conn.commit()
    conn.close()
    (adapter.state_dir / "later.txt").write_text("written after the snapshot")
    adapter.restore(snapshot)
    assert not (adapter.state_dir / "later.txt").exists()
    conn = connect()
    assert conn.execute("SELECT state FROM jobs").fetchall() == [("queued",)]
    conn.close()
    # The harness's files are not the worker's: the payloads survive a restore.
    assert adapter.jobs_dir.parent == adapter.state_dir.parent == tmp_path / "trial"


def test_enqueue_that_exits_non_zero_is_a_config_error(tmp_path: Path) -> None:
    adapter = adapter_for(tmp_path, QUEUE_FULL="1")
    with pytest.raises(ConfigError) as info:
        adapter.enqueue("j-0001", "billing", {"job_id": "j-0001"})
    message = str(info.value)
    assert "\n" not in message
    config = tmp_path / "crashpoint.toml"
    payload = adapter.jobs_dir / "j-0001.json"
    command = f"{sys.executable} {tmp_path / 'enqueue.py'} j-0001 {payload}"
    assert message == (
        f"{config}: target.enqueue command `{command}` exited 3 "
        "(stderr, last lines: queue is full | second line); make it exit 0 once the job is queued"
    )


def test_status_that_prints_garbage_is_a_config_error(tmp_path: Path) -> None:
    adapter = adapter_for(tmp_path, STATUS_GARBAGE="1")
    with pytest.raises(ConfigError) as info:
        adapter.job_status("j-0001")
    message = str(info.value)
    config = tmp_path / "crashpoint.toml"
    command = f"{sys.executable} {tmp_path / 'status.py'} j-0001"
    assert message == (
        f"{config}: target.status command `{command}` printed "
        '"ok, j-0001", which is not '
        'JSON (stderr, last lines: warning: cache cold); print one line like {"state": "done", '
        '"attempts": 1}'
    )


def test_a_command_that_cannot_start_is_a_config_error(tmp_path: Path) -> None:
    adapter = adapter_for(tmp_path)
    adapter.config = replace(adapter.config, status=("no-such-program-here", "{job_id}"))
    with pytest.raises(
        ConfigError,
        match=r"target.status command `no-such-program-here j-0001`"
        r" cannot start \(No such file or directory\)",
    ):
        adapter.job_status("j-0001")


def test_a_pyproject_tool_table_is_read_like_crashpoint_toml(scratch: Path, tmp_path: Path) -> None:
    good = (EXAMPLE / "crashpoint.toml").read_text()
    body = good.replace("[target]", "[tool.crashpoint.target]").replace(
        "[[providers]]", "[[tool.crashpoint.providers]]"
    )
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "mine"\n' + body.replace("workers = 2", "workers = 0"))
    # -c with the directory finds the table; the mistake is named by its full key.
    done = run(["-c", str(tmp_path), "--out", str(tmp_path / "out")], scratch)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"{pyproject}: tool.crashpoint.target.workers must be from 1 to 64, got 0" in line
