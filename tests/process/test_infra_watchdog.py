"""Nothing outlives a harness that is SIGKILLed: the watchdog reaps groups, containers, dirs."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from harness.backends.docker import connect, sweep
from harness.contract.errors import InfrastructureError
from harness.pytest_plugin import missing
from harness.watchdog import Watchdog

pytestmark = pytest.mark.process

# A stand-in for the harness: starts a watchdog, a worker tree, maybe a container, a temp
# dir; reports them in info.json; then waits to be killed.
HARNESS = """
import json, os, sys, tempfile, time
import psutil
from harness.watchdog import Watchdog
from harness.backends.process import ProcessBackend
info_path, with_docker = sys.argv[1], sys.argv[2] == "docker"
env = dict(os.environ)
watchdog = Watchdog.start()
state = tempfile.mkdtemp(prefix="cp-wd-")
watchdog.watch_dir(state)
tree = (
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
)
backend = ProcessBackend(watchdog=watchdog)
worker = backend.start("w", [sys.executable, "-c", tree], env=env, cwd=state)
info = {"watchdog": watchdog.pid, "pgid": worker.pid, "state": state, "run_id": watchdog.run_id}
if with_docker:
    from harness.backends.docker import DockerBackend
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    box = DockerBackend(watchdog=watchdog).start("c", sleeper, env=env, cwd=state)
    info["container"] = box.container.id
while not psutil.Process(worker.pid).children(recursive=True):
    time.sleep(0.01)
with open(info_path + ".tmp", "w") as f:
    json.dump(info, f)
os.rename(info_path + ".tmp", info_path)
time.sleep(60)
"""


def _group_members(pgid: int) -> list[int]:
    members = []
    for proc in psutil.process_iter(["pid", "status"]):
        with contextlib.suppress(ProcessLookupError, psutil.Error):
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(proc.pid)
    return members


def _settle(pred: Any, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="cp-") as d:
        yield Path(d)


def _kill_the_harness(workdir: Path, mode: str) -> dict[str, Any]:
    (workdir / "standin.py").write_text(HARNESS)
    info_path = workdir / "info.json"
    parent = subprocess.Popen(
        [sys.executable, "standin.py", str(info_path), mode], cwd=workdir, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 20
        while not info_path.exists():
            assert parent.poll() is None, f"the stand-in harness exited {parent.returncode}"
            assert time.monotonic() < deadline, "the stand-in harness never got going"
            time.sleep(0.02)
        info: dict[str, Any] = json.loads(info_path.read_text())
        assert _group_members(info["pgid"]), "the worker group should be running"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        return info
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def _cleanup(info: dict[str, Any]) -> None:
    """If the watchdog failed, do its job so the test leaks nothing either way."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(info["pgid"], signal.SIGKILL)
    shutil.rmtree(info["state"], ignore_errors=True)


def test_sigkilled_harness_leaves_no_process_group_or_dir(workdir: Path) -> None:
    info = _kill_the_harness(workdir, "process")
    try:
        assert _settle(lambda: not _group_members(info["pgid"])), "worker group outlived"
        assert _settle(lambda: not Path(info["state"]).exists()), "state dir outlived"
        assert _settle(
            lambda: (
                not psutil.pid_exists(info["watchdog"])
                or psutil.Process(info["watchdog"]).status() == psutil.STATUS_ZOMBIE
            )
        )
    finally:
        _cleanup(info)


@pytest.mark.docker
def test_sigkilled_harness_leaves_no_container(workdir: Path, pytestconfig: pytest.Config) -> None:
    try:
        client = connect(timeout_s=5)
    except InfrastructureError as exc:
        missing(pytestconfig, str(exc))
    info = _kill_the_harness(workdir, "docker")
    label = {"label": f"crashpoint.run={info['run_id']}"}
    try:
        assert client.containers.list(all=True, filters=label, ignore_removed=True), (
            "container should exist at first"
        )
        assert _settle(
            lambda: not client.containers.list(all=True, filters=label, ignore_removed=True), 8.0
        )
        assert _settle(lambda: not _group_members(info["pgid"]))
    finally:
        _cleanup(info)
        sweep(info["run_id"], client)
        client.close()


def test_normal_close_sweeps_what_is_still_registered(workdir: Path) -> None:
    leftover = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    forgotten = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    kept_dir = workdir / "kept"
    kept_dir.mkdir()
    try:
        watchdog = Watchdog.start()
        watchdog.watch_group(leftover.pid)
        watchdog.watch_group(forgotten.pid)
        watchdog.forget_group(forgotten.pid)
        watchdog.watch_dir(kept_dir)
        watchdog.forget_dir(kept_dir)
        watchdog.close()
        assert leftover.wait(5) == -signal.SIGKILL
        assert forgotten.poll() is None, "a forgotten group must be left alone"
        assert kept_dir.exists(), "a forgotten dir must be left alone"
    finally:
        for proc in (leftover, forgotten):
            proc.kill()
            proc.wait()
