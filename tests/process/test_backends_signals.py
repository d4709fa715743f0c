"""Process backend: signals reach the whole tree, exits and their timing are recorded,
under both containments (a cgroup v2 per worker, and the process-group fallback)."""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from harness.backends.cgroup import CGROUP2, PROCESS_GROUP
from harness.backends.process import ProcessBackend, ProcessHandle
from harness.backends.zygote import Zygote
from harness.contract.errors import InfrastructureError
from harness.history import History
from harness.pytest_plugin import missing

pytestmark = pytest.mark.process

# A worker that starts a child, which starts a grandchild (optionally in a new session,
# like a browser an agent launches), writes the pids and sleeps.
TREE = """
import json, os, subprocess, sys, time
detach = sys.argv[1] == "detach"
grand = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                         start_new_session=detach)
with open("tree.json.tmp", "w") as f:
    json.dump({"grandchild": grand.pid}, f)
os.rename("tree.json.tmp", "tree.json")
time.sleep(60)
"""


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="cp-") as d:
        yield Path(d)


@pytest.fixture(params=[CGROUP2, PROCESS_GROUP])
def containment(request: pytest.FixtureRequest, pytestconfig: pytest.Config) -> str:
    """Each mechanism in turn; cgroup v2 needs root and a v2 hierarchy."""
    choice = str(request.param)
    probe = ProcessBackend(containment=choice)
    try:
        assert probe.containment == choice
    except InfrastructureError as exc:
        missing(pytestconfig, str(exc))
    finally:
        probe.close()
    return choice


@pytest.fixture(params=["cold", "preloaded"])
def backend(
    containment: str, workdir: Path, request: pytest.FixtureRequest
) -> Iterator[ProcessBackend]:
    """Workers started, or forked from a zygote of this interpreter ([target.preload])."""
    zygote = None
    if request.param == "preloaded":
        log = workdir / "zygote" / "zygote.log"
        zygote = Zygote(sys.executable, ["json"], cwd=workdir, log=log, watchdog=None)
    # The workdir outlives the backend: its trees write there until the backend closes.
    try:
        with ProcessBackend(history=History(), containment=containment, zygote=zygote) as b:
            yield b
    finally:
        if zygote is not None:
            zygote.close()


def _start_tree(
    backend: ProcessBackend, workdir: Path, *, detach: bool = False
) -> tuple[ProcessHandle, list[int]]:
    """Worker -> child -> grandchild; returns the handle and [child, grandchild] pids."""
    (workdir / "tree.py").write_text(TREE)
    outer = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, 'tree.py', {'detach' if detach else 'keep'!r}])\n"
        "time.sleep(60)\n"
    )
    (workdir / "outer.py").write_text(outer)
    handle = backend.start("w", [sys.executable, "outer.py"], env=dict(os.environ), cwd=workdir)
    if backend._history is not None:
        starts = [e.fields.get("start") for e in backend._history if e.kind == "worker_start"]
        assert starts == ["preloaded" if backend._zygote is not None else None]
    deadline = time.monotonic() + 10
    while not (workdir / "tree.json").exists():
        assert time.monotonic() < deadline, "the worker tree never came up"
        time.sleep(0.01)
    grandchild = json.loads((workdir / "tree.json").read_text())["grandchild"]
    child = psutil.Process(grandchild).ppid()
    return handle, [child, grandchild]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_all(pids: list[int], pred: object, timeout_s: float = 3.0) -> bool:
    assert callable(pred)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(pred(p) for p in pids):
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
@pytest.mark.parametrize("detach", [False, True], ids=["same-group", "setsid-grandchild"])
def test_signal_kills_the_whole_tree(
    backend: ProcessBackend, workdir: Path, sig: signal.Signals, detach: bool
) -> None:
    handle, descendants = _start_tree(backend, workdir, detach=detach)
    handle.signal(sig)
    assert handle.wait(5) == -sig
    assert _wait_all(descendants, _gone), f"descendants survived {sig.name}: {descendants}"


def test_stop_and_continue_reach_the_whole_tree(backend: ProcessBackend, workdir: Path) -> None:
    handle, descendants = _start_tree(backend, workdir, detach=True)
    everyone = [handle.pid, *descendants]

    def status(pid: int) -> str:
        return str(psutil.Process(pid).status())

    def frozen(pid: int) -> bool:
        # A cgroup freeze shows as sleeping: ask the worker's cgroup, which holds them all.
        assert handle.cgroup is not None
        members = (handle.cgroup / "cgroup.procs").read_text().split()
        return str(pid) in members and "frozen 1" in (handle.cgroup / "cgroup.events").read_text()

    stopped = (
        (lambda p: status(p) == psutil.STATUS_STOPPED)
        if (handle.containment == PROCESS_GROUP)
        else frozen
    )
    handle.pause()
    assert _wait_all(everyone, stopped)
    assert handle.alive()
    handle.resume()
    assert _wait_all(everyone, lambda p: not stopped(p))
    kinds = [e.fields.get("signal") for e in backend._history or [] if e.kind == "signal"]
    assert kinds == ["SIGSTOP", "SIGCONT"]


def test_exit_status_timing_and_logs(backend: ProcessBackend, workdir: Path) -> None:
    code = (
        "import sys, time; print('out'); print('err', file=sys.stderr); time.sleep(0.2); "
        "sys.exit(7)"
    )
    handle = backend.start("w7", [sys.executable, "-c", code], env=dict(os.environ), cwd=workdir)
    assert handle.wait(0.01) is None
    assert handle.alive()
    assert handle.wait(5) == 7
    assert not handle.alive()
    assert handle.exited_at is not None
    assert 0.2 <= handle.exited_at - handle.started_at < 2.0
    assert handle.stdout_path.read_text() == "out\n"
    assert handle.stderr_path.read_text() == "err\n"
    exits = [e for e in backend._history or [] if e.kind == "worker_exit"]
    assert [(e.fields["returncode"], e.fields["status"]) for e in exits] == [(7, "exit 7")]


def test_stop_escalates_to_kill_and_close_reaps_everything(workdir: Path, containment: str) -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    backend = ProcessBackend(containment=containment)
    ignoring = backend.start(
        "stubborn", [sys.executable, "-c", stubborn], env=dict(os.environ), cwd=workdir
    )
    handle, descendants = _start_tree(backend, workdir)
    handle.pause()  # a stopped tree must still be stopped by close()
    time.sleep(0.2)  # let the stubborn worker install its handler
    assert ignoring.stop(timeout_s=0.3) == -signal.SIGKILL
    backend.close()
    assert handle.returncode == -signal.SIGTERM
    for pid in [ignoring.pid, handle.pid, *descendants]:
        assert not psutil.pid_exists(pid) or _gone(pid), f"pid {pid} outlived close()"
    # The zombies were reaped by close(): our own children are gone entirely.
    assert not psutil.pid_exists(handle.pid)
    assert not psutil.pid_exists(ignoring.pid)
