"""A target whose enqueue and status commands are served (``[target.serve]``) through a
small matrix with the real CLI: every cell holds, the worker's job-end events end each
wait, and nothing the trials started outlives the run; a served command that breaks the
protocol is the cell's reason, not a hang."""

from __future__ import annotations

from pathlib import Path

import pytest
from clikit import ROOT, leftovers, results, run
from test_examples_standalone import RQ, require

pytestmark = pytest.mark.process

EXAMPLE = ROOT / "examples" / "rq-worker"
SMALL = ["--provider", "billing", "--signal", "SIGKILL", "--seed", "7"]


def test_the_rq_worker_served_holds_a_small_matrix_and_leaves_nothing(
    pytestconfig: pytest.Config, scratch: Path, tmp_path: Path
) -> None:
    require(pytestconfig, RQ)
    out = tmp_path / "out"
    args = ["-c", str(EXAMPLE / "crashpoint-served.toml"), *SMALL, "--out", str(out)]
    scenarios = ["crash_after_external_success", "simultaneous_trigger", "duplicate_delivery"]
    for scenario in scenarios:
        args += ["--scenario", scenario]
    done = run(args, scratch)
    assert done.returncode == 0, done.stderr
    assert leftovers(scratch) == []
    trials = results(out)["trials"]
    assert {t["scenario"] for t in trials} == set(scenarios)
    for t in trials:
        assert (t["verdict"], t["violations"]) == ("held", []), t["reason"]
        ends = [
            e for e in t["events"] if e["kind"] == "failpoint" and e["fields"]["point"] == "job_end"
        ]
        assert ends, f"{t['id']}: the worker announced no job's end"
        assert {e["fields"]["outcome"] for e in ends} == {"done"}


def test_a_served_command_that_breaks_the_protocol_is_the_cells_reason(
    pytestconfig: pytest.Config, scratch: Path, tmp_path: Path
) -> None:
    require(pytestconfig, RQ)
    text = (EXAMPLE / "crashpoint-served.toml").read_text()
    # A status server that answers its handshake with something else, then lingers.
    code = "import sys; sys.stdin.readline(); print('{}', flush=True); sys.stdin.read()"
    bad = f'["python3", "-c", "{code}"]'
    text = text.replace('status = ["python3", "serve.py"]', f"status = {bad}")
    for name in ("worker.py", "enqueue.py", "status.py", "serve.py"):
        text = text.replace(f'"{name}"', f'"{EXAMPLE / name}"')
    config = tmp_path / "crashpoint.toml"
    config.write_text(text)
    out = tmp_path / "out"
    args = ["-c", str(config), *SMALL, "--scenario", "crash_after_external_success"]
    done = run([*args, "--out", str(out)], scratch)
    assert leftovers(scratch) == []
    trials = results(out)["trials"]
    assert [t["verdict"] for t in trials] == ["inconclusive"], done.stderr
    reason = trials[0]["reason"]
    assert "target.serve.status command" in reason
    assert "answered the handshake with {}" in reason


def test_commands_served_once_per_run_serve_every_trial_and_go_with_the_run(
    scratch: Path, tmp_path: Path
) -> None:
    """``scope = "run"``: one enqueue and one status process for all the run's trials,
    each request in its own trial's state (a restore under the live server included)."""
    pyqueue = ROOT / "tests" / "process" / "workers" / "pyqueue"
    starts = tmp_path / "starts"
    # Each server start leaves its pid in `starts`, then becomes the bench's pyqueue server.
    serve = f'["sh", "-c", "echo $$ >> {starts}; exec python3 {ROOT}/benchmarks/heavy/serve.py"]'
    text = (pyqueue / "crashpoint.toml").read_text()
    for name in ("worker.py", "enqueue.py", "status.py", "cancel.py"):
        text = text.replace(f'"{name}"', f'"{pyqueue / name}"')
    text = text.replace(
        f'"{pyqueue / "worker.py"}"]', f'"{pyqueue / "worker.py"}", "--job-end"]', 1
    )
    text += f'\n[target.serve]\nscope = "run"\nenqueue = {serve}\nstatus = {serve}\n'
    config = tmp_path / "crashpoint.toml"
    config.write_text(text)
    out = tmp_path / "out"
    scenarios = ["crash_after_external_success", "duplicate_delivery", "state_store_restore"]
    args = ["-c", str(config), *SMALL, "-j", "2", "--out", str(out)]
    for scenario in scenarios:
        args += ["--scenario", scenario]
    done = run(args, scratch)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert leftovers(scratch) == []
    trials = results(out)["trials"]
    assert {t["scenario"] for t in trials} == set(scenarios)
    for t in trials:
        assert (t["verdict"], t["violations"]) == ("held", []), t["reason"]
    # Three trials, and one enqueue server and one status server between them.
    assert len(starts.read_text().split()) == 2
