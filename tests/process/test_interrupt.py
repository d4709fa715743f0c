"""Ctrl-C and SIGKILL of the harness mid-run leave no worker, provider or trial directory,
and nothing else that carries the run's marker: process groups, ports, containers."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from leftovers import Leftovers, Marked

pytestmark = pytest.mark.process


#: Python keeps SIGINT ignored when it starts ignored, as a program started in the background
#: by a shell without job control does (``cmd &`` in a script); Ctrl-C then cannot stop it,
#: which is the convention and not what this test is about. The run's own process image is
#: exec'd from here with SIGINT back at its default, whatever the test runner inherited.
_WITH_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'harness', *sys.argv[1:]])"
)


PYQUEUE = Path(__file__).parent / "workers" / "pyqueue"
#: What names a busy run's worker in its argv: the reference worker's module, or, for
#: workers forked from the run's zygote ([target.preload]), the zygote's own script (a
#: fork keeps its parent's argv), seen twice: the zygote and a worker.
BUSY = {"reference": ("scenarios.worker", 1), "preloaded": ("zygote_server.py", 2)}


def preloaded_config(tmp_path: Path) -> Path:
    """The pyqueue worker with ``[target.preload]``: its workers fork from a zygote."""
    text = (PYQUEUE / "crashpoint.toml").read_text()
    for name in ("worker.py", "enqueue.py", "status.py", "cancel.py"):
        text = text.replace(f'"{name}"', f'"{PYQUEUE / name}"')
    preload = '[target.preload]\nmodules = ["sqlite3"]\n\n[[providers]]'
    path = tmp_path / "crashpoint.toml"
    path.write_text(text.replace("[[providers]]", preload, 1))
    return path


def start_run(tmp_path: Path, marked: Marked, target: str = "reference") -> subprocess.Popen[str]:
    # A run that outlives its Ctrl-C is sent SIGABRT, and faulthandler prints where each of
    # its threads was waiting: the one thing a failure here has to say.
    env = marked.env(PYTHONFAULTHANDLER="1")
    args = ["run", "--scenario", "lease_expiry_slow_worker"]
    if target == "preloaded":
        args += ["-c", str(preloaded_config(tmp_path))]
    args += ["--scenario", "crash_before_external_call", "-j", "2", "--out", str(tmp_path / "o")]
    # A long lease keeps every trial waiting for it to run out (10 s or more each), so the
    # run is still busy when the signal comes: at the reference's own lease these twelve
    # trials take about 3 s, less than seeing the run busy and sampling it can take.
    args += ["--lease-ttl-s", "10"]
    return subprocess.Popen(
        [sys.executable, "-c", _WITH_DEFAULT_SIGINT, *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def descendants_when_busy(
    proc: subprocess.Popen[str], tmp: Path, target: str = "reference"
) -> list[psutil.Process]:
    """Wait until trials are running (trial dirs exist), then list the harness's tree."""
    word, count = BUSY[target]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        kids = psutil.Process(proc.pid).children(recursive=True)
        if any(tmp.iterdir()) and sum(word in _cmdline(k) for k in kids) >= count:
            return kids
        time.sleep(0.05)
    pytest.fail("the run never got busy")


def _cmdline(proc: psutil.Process) -> str:
    # A worker may exit between the listing and this read (a zombie until reaped).
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def _stderr_within(proc: subprocess.Popen[str], seconds: float) -> str:
    """The run's stderr once it exits; past ``seconds``, a failure that says how its
    signals stood and where its threads were."""
    try:
        return proc.communicate(timeout=seconds)[1]
    except subprocess.TimeoutExpired:
        state = _signal_state(proc.pid)
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate(timeout=10)
        pytest.fail(f"no exit within {seconds:.0f} s of SIGINT ({state}):\n{err}")


def _signal_state(pid: int) -> str:
    """Which signals ``pid`` ignores, blocks and catches, from the kernel's own view."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError as exc:
        return f"no status: {exc}"
    wanted = ("SigBlk", "SigIgn", "SigCgt")
    return ", ".join(line.replace("\t", " ") for line in lines if line.startswith(wanted))


def _close(proc: subprocess.Popen[str]) -> None:
    """Reap the run and close its stderr pipe, whatever the test's outcome was."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()


def gone_within(
    procs: list[psutil.Process], tmp: Path, seconds: float
) -> tuple[list[int], list[str]]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = [p.pid for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        left = [p.name for p in tmp.iterdir()]
        if not alive and not left:
            return [], []
        time.sleep(0.1)
    return alive, left


@pytest.mark.parametrize(
    ("target", "sig", "code"),
    [("reference", signal.SIGINT, 130), ("preloaded", signal.SIGTERM, 143)],
)
def test_ctrl_c_or_sigterm_stops_the_run_and_cleans_up(
    tmp_path: Path, target: str, sig: signal.Signals, code: int
) -> None:
    marked = Marked(tmp_path)
    proc = start_run(tmp_path, marked, target)
    try:
        kids = descendants_when_busy(proc, marked.tmp, target)
        marked.sample()
        proc.send_signal(sig)
        err = _stderr_within(proc, 30)
        assert proc.returncode == code, err
        assert "interrupted" in err
        assert gone_within(kids, marked.tmp, 10) == ([], [])
        assert marked.seen_ports, "the run's providers were listening"
        assert marked.wait_clean(10) == Leftovers()
    finally:
        marked.kill_all()
        _close(proc)


@pytest.mark.parametrize("target", ["reference", "preloaded"])
def test_sigkill_of_the_harness_is_cleaned_up_by_the_watchdog(tmp_path: Path, target: str) -> None:
    marked = Marked(tmp_path)
    proc = start_run(tmp_path, marked, target)
    try:
        kids = descendants_when_busy(proc, marked.tmp, target)
        marked.sample()
        proc.kill()
        proc.communicate(timeout=10)
        assert gone_within(kids, marked.tmp, 15) == ([], [])
        assert marked.seen_ports, "the run's providers were listening"
        assert marked.wait_clean(10) == Leftovers()
    finally:
        marked.kill_all()
        _close(proc)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stopped_run_writes_the_report_of_the_trials_that_finished(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    # A 14-minute run stopped by a cancelled CI job used to write nothing at all.
    marked = Marked(tmp_path)
    out = tmp_path / "o"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WITH_DEFAULT_SIGINT, "run", "-j", "1", "--out", str(out)],
        env=marked.env(PYTHONFAULTHANDLER="1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stderr is not None
        # One trial at a time: once the second has finished, stop the run.
        for line in proc.stderr:
            if line.startswith("[2/"):
                break
        proc.send_signal(sig)
        err = _stderr_within(proc, 30)
        assert proc.returncode == code, err
        doc = json.loads((out / "results.json").read_text())
        stop = doc["interrupted"]
        verdicts = [(t["id"], t["verdict"], t["reason"]) for t in doc["trials"]]
        assert stop["signal"] == sig.name
        assert stop["finished"] == len(doc["trials"]), verdicts
        assert 2 <= stop["finished"] < stop["cells"], (stop, verdicts, err)
        # Only trials that ran to their end are in it: none cut off by the signal.
        assert all(v == "held" for _, v, _ in verdicts), verdicts
        assert (out / "index.html").is_file()
        assert f"interrupted by {sig.name}" in err
        assert marked.wait_clean(10) == Leftovers()
    finally:
        marked.kill_all()
        _close(proc)
