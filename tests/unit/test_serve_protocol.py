"""The served-command protocol (targets/serve.py) against a tiny real server process:
framing, the handshake, each way it can go wrong, and the stop that leaves nothing."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import psutil
import pytest

from harness.targets import serve
from harness.targets.serve import Served, ServeError

#: One server, told by its first argument how to behave.
SERVER = r"""
import json, os, signal, subprocess, sys, time
mode = sys.argv[1]
if mode == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode == "child":
    # Something it started, in its group: it must go with it.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    open(sys.argv[2], "w").write(str(child.pid))
hello = sys.stdin.readline()
sys.stderr.write("server up\n"); sys.stderr.flush()
if mode == "bad-handshake":
    print(json.dumps({"protocol": "something-else"}), flush=True)
elif mode == "no-handshake":
    sys.stdin.read()  # never answers: reads until stdin closes
    sys.exit(0)
else:
    ok = {"protocol": "crashpoint-serve", "version": 1, "seen": json.loads(hello)}
    print(json.dumps(ok), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    if mode == "garbage":
        print("not json at all", flush=True)
    elif mode == "dies":
        sys.stderr.write("boom: the database went away\n"); sys.exit(3)
    elif mode == "error":
        print(json.dumps({"error": "no such queue"}), flush=True)
    elif mode == "split":
        out = json.dumps({"state": "done", "echo": req}).encode() + b"\n"
        os.write(1, out[:5]); os.write(1, out[5:])
    else:
        print(json.dumps({"state": "done", "echo": req}), flush=True)
if mode in ("ignore-stdin", "ignore-term"):
    while True:
        time.sleep(1)  # the stop must come by signal
"""


@pytest.fixture(autouse=True)
def short_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serve, "CLOSE_GRACE_S", 0.2)


def served(tmp_path: Path, *args: str) -> Served:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    return Served(
        "status",
        [sys.executable, str(script), *args],
        cwd=tmp_path,
        log=tmp_path / "serve-status.log",
        where="crashpoint.toml",
    )


def test_a_request_gets_its_reply_after_the_handshake(tmp_path: Path) -> None:
    s = served(tmp_path, "good")
    try:
        first = s.request({"op": "status", "job_id": "j-1"}, os.environ, 5.0)
        second = s.request({"op": "status", "job_id": "j-2"}, os.environ, 5.0)
        # Its pid is named for the CPU wait that stretches the trial's bounds.
        assert s.pid is not None
        assert psutil.Process(s.pid).cmdline()[-1] == "good"
    finally:
        s.close()
    assert s.pid is None
    assert first == {"state": "done", "echo": {"op": "status", "job_id": "j-1"}}
    assert second["echo"]["job_id"] == "j-2"  # one process answered both, in order
    assert s.ready_s is not None


def test_a_reply_written_in_pieces_is_one_line(tmp_path: Path) -> None:
    s = served(tmp_path, "split")
    try:
        assert s.request({"op": "status", "job_id": "j-1"}, os.environ, 5.0)["state"] == "done"
    finally:
        s.close()


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("bad-handshake", "answered the handshake with"),
        ("garbage", "not one JSON object"),
        ("dies", "exited 3 mid-trial"),
        ("error", "answered an error: no such queue"),
    ],
)
def test_each_protocol_error_is_one_clear_config_error(
    tmp_path: Path, mode: str, said: str
) -> None:
    s = served(tmp_path, mode)
    try:
        with pytest.raises(ServeError) as caught:
            s.request({"op": "status", "job_id": "j-1"}, os.environ, 5.0)
    finally:
        s.close()
    text = str(caught.value)
    assert said in text
    assert text.startswith("crashpoint.toml: target.serve.status command `")
    assert "\n" not in text
    if mode == "dies":
        assert "boom: the database went away" in text  # its stderr's last line


def test_a_server_that_never_answers_times_out_rather_than_hangs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(serve, "READY_TIMEOUT_S", 0.3)
    s = served(tmp_path, "no-handshake")
    try:
        with pytest.raises(ServeError, match="gave no handshake within"):
            s.request({"op": "status", "job_id": "j-1"}, os.environ, 5.0)
    finally:
        s.close()


def test_a_broken_server_is_replaced_by_a_fresh_one(tmp_path: Path) -> None:
    s = served(tmp_path, "error")
    with pytest.raises(ServeError):
        s.request({"op": "status", "job_id": "j-1"}, os.environ, 5.0)
    # An error reply keeps the stream in step: the same process answers again.
    with pytest.raises(ServeError, match="no such queue"):
        s.request({"op": "status", "job_id": "j-2"}, os.environ, 5.0)
    s.close()


def test_a_program_that_cannot_start_says_so(tmp_path: Path) -> None:
    s = Served("enqueue", ["no-such-program-here"], cwd=tmp_path, log=tmp_path / "l", where="c")
    with pytest.raises(ServeError, match="cannot start"):
        s.request({"op": "enqueue", "job": {}}, os.environ, 5.0)


@pytest.mark.parametrize("mode", ["good", "ignore-stdin", "ignore-term"])
def test_the_stop_leaves_no_process(tmp_path: Path, mode: str) -> None:
    s = served(tmp_path, mode)
    s.request({"op": "status", "job_id": "j-1"}, os.environ, 5.0)
    proc = s._proc
    assert proc is not None
    s.close()
    assert proc.returncode is not None  # reaped: by stdin's close, SIGTERM or SIGKILL
    s.close()  # idempotent


def test_what_the_server_started_goes_with_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    s = served(tmp_path, "child", str(pid_file))
    s.request({"op": "status", "job_id": "j-1"}, os.environ, 5.0)
    child = int(pid_file.read_text())
    assert psutil.pid_exists(child)
    s.close()
    # Killed with its group; reparented, so it is reaped by whoever adopted it (or left
    # a zombie, which is dead all the same).
    gone, _ = psutil.wait_procs([psutil.Process(child)], timeout=5.0)
    assert gone or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


#: A served status command that notes every line it is given, and its own pid.
RECORDER = r"""
import json, os, sys
seen = open(sys.argv[1], "a")
for line in sys.stdin:
    req = json.loads(line)
    seen.write(json.dumps({"pid": os.getpid(), **req}) + "\n"); seen.flush()
    if "protocol" in req:
        print(json.dumps({"protocol": "crashpoint-serve", "version": 1}), flush=True)
    else:
        print(json.dumps({"state": "done", "attempts": 1}), flush=True)
"""


def test_a_run_scoped_command_serves_every_trial_naming_each(tmp_path: Path) -> None:
    from test_target_config import GOOD, write

    from harness.targets.command_calls import CommandCalls
    from harness.targets.config import load_config
    from harness.targets.serve import ServedPool

    (tmp_path / "recorder.py").write_text(RECORDER)
    seen = tmp_path / "seen.jsonl"
    table = f'[target.serve]\nscope = "run"\nstatus = ["python3", "recorder.py", "{seen}"]\n'
    config = load_config(
        write(tmp_path, GOOD.replace("[target.ledger]", table + "[target.ledger]"))
    )
    pool = ServedPool(tmp_path / "logs")
    trials = [
        CommandCalls(config, state_dir=tmp_path / t / "state", trial_dir=tmp_path / t, pool=pool)
        for t in ("t1", "t2")
    ]
    try:
        for n, calls in enumerate(trials, 1):
            env = {**os.environ, "CRASHPOINT_STATE_DIR": str(calls.state_dir)}
            assert calls.status(f"j-{n}", env).state == "done"
            calls.close()  # the trial ends; the run's process serves the next one
        pid = pool.get("status", trials[0].served["status"].argv, cwd=tmp_path, where="").pid
        assert pid is not None
    finally:
        pool.close()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    lines = [json.loads(line) for line in seen.read_text().splitlines()]
    hello, first, second = lines
    assert {row["pid"] for row in lines} == {pid}  # one process for both trials
    assert (hello["scope"], hello["op"]) == ("run", "status")
    for row, trial in ((first, "t1"), (second, "t2")):
        assert row["cwd"] == str(tmp_path / trial / "state")
        # Only what the trial adds to the harness's own environment travels.
        assert row["env"] == {"CRASHPOINT_STATE_DIR": str(tmp_path / trial / "state")}
