"""Docker backend on the local engine: pause, signals to the tree, exits, logs, cleanup."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from harness.backends.docker import COLD_IN_CONTAINER, DockerBackend, DockerHandle, connect
from harness.contract.errors import InfrastructureError
from harness.history import History
from harness.pytest_plugin import missing
from harness.rendezvous import Rendezvous
from harness.targets.config import load_config

pytestmark = [pytest.mark.process, pytest.mark.docker]

# Starts a grandchild, says so in the state dir (a read-write bind), and sleeps.
TREE = (
    "import subprocess, sys, time, pathlib\n"
    "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "pathlib.Path('ready').write_text(str(g.pid))\n"
    "time.sleep(60)\n"
)


@pytest.fixture(scope="module")
def client(pytestconfig: pytest.Config) -> Iterator[Any]:
    try:
        c = connect(timeout_s=5)
    except InfrastructureError as exc:
        missing(pytestconfig, str(exc))
    yield c
    c.close()


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="cp-") as d:
        yield Path(d)


@pytest.fixture
def backend(client: Any, workdir: Path) -> Iterator[DockerBackend]:
    # The workdir outlives the containers: their processes write there until they go.
    b = DockerBackend(client=client, history=History())
    yield b
    b.close()
    assert (
        client.containers.list(
            all=True, filters={"label": f"crashpoint.run={b.run_id}"}, ignore_removed=True
        )
        == []
    )


def _tree(backend: DockerBackend, workdir: Path) -> tuple[DockerHandle, list[psutil.Process]]:
    handle = backend.start("tree", [sys.executable, "-c", TREE], env=dict(os.environ), cwd=workdir)
    deadline = time.monotonic() + 10
    while not (workdir / "ready").exists():
        assert time.monotonic() < deadline, f"the worker never wrote {workdir / 'ready'}"
        time.sleep(0.02)
    procs = psutil.Process(handle.pid).children(recursive=True)
    assert len(procs) == 2, f"expected worker and grandchild under init, got {procs}"
    return handle, procs


def _settle(pred: Any, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


def test_pause_freezes_every_process_and_resume_thaws(
    backend: DockerBackend, workdir: Path
) -> None:
    handle, procs = _tree(backend, workdir)
    running = {psutil.STATUS_SLEEPING, psutil.STATUS_RUNNING}
    handle.pause()
    assert handle.container.status == "paused" or _settle(lambda: handle._status() == "paused")
    # The cgroup freezer shows as uninterruptible sleep; never as running or sleeping.
    assert _settle(lambda: all(p.status() not in running for p in procs))
    handle.resume()
    assert _settle(lambda: all(p.status() in running for p in procs))
    assert handle.alive()


def test_sigterm_reaches_worker_and_grandchild(backend: DockerBackend, workdir: Path) -> None:
    handle, procs = _tree(backend, workdir)
    handle.signal(signal.SIGTERM)
    assert handle.wait(10) == -signal.SIGTERM
    assert handle.engine_exit_code == 143
    assert _settle(lambda: not any(p.is_running() for p in procs))


def test_exit_code_and_logs_are_kept(backend: DockerBackend, workdir: Path) -> None:
    code = "import sys; print('to stdout'); print('to stderr', file=sys.stderr); sys.exit(3)"
    handle = backend.start("exit3", [sys.executable, "-c", code], env=dict(os.environ), cwd=workdir)
    assert handle.wait(15) == 3
    assert handle.exited_at is not None
    assert handle.exited_at > handle.started_at
    assert handle.stdout_path.read_text() == "to stdout\n"
    assert handle.stderr_path.read_text() == "to stderr\n"


def test_stop_of_a_paused_worker(backend: DockerBackend, workdir: Path) -> None:
    handle, _ = _tree(backend, workdir)
    handle.pause()
    assert handle.stop(timeout_s=5) == -signal.SIGTERM
    assert not handle.alive()


def test_container_worker_held_at_a_failpoint_then_killed(
    backend: DockerBackend, workdir: Path
) -> None:
    code = (
        "from harness.contract.failpoint import failpoint\n"
        "failpoint('before_external_call', 'j-0001', 1)\n"
        "print('past the boundary', flush=True)\n"
    )
    with Rendezvous(workdir / "fp.sock") as rv:
        gate = rv.hold("before_external_call")
        env = {**os.environ, **rv.env}
        handle = backend.start("held", [sys.executable, "-c", code], env=env, cwd=workdir)
        hit = gate.wait(15)
        # The worker reports its namespace pid; the socket tells us the host one.
        assert hit.peer_pid in [p.pid for p in psutil.Process(handle.pid).children()]
        handle.signal(signal.SIGKILL)
        assert handle.wait(10) == -signal.SIGKILL
        assert hit.wait_disconnected(5)
    assert "past the boundary" not in handle.stdout_path.read_text()


#: An example that declares [target.preload] and no [target.docker].
PRELOADING = Path(__file__).resolve().parents[2] / "examples" / "mcp-agent" / "crashpoint.toml"


def test_a_preloading_targets_container_worker_says_it_started_cold_and_why(
    client: Any, workdir: Path
) -> None:
    # No container is forked from the run's zygote: each worker_start must say so, as a
    # process backend's cold start does, or a report would count it as neither.
    config = load_config(PRELOADING)
    assert config.preload
    assert config.docker is None
    make = DockerBackend.for_target(config)
    plain = DockerBackend.for_target(None)
    for factory, preloading in ((make, True), (plain, False)):
        backend = factory(client=client, history=History())
        try:
            handle = backend.start("w", [sys.executable, "-c", "pass"], env={}, cwd=workdir)
            assert handle.wait(15) == 0
        finally:
            backend.close()
        (start,) = [e.fields for e in backend._history if e.kind == "worker_start"]
        if preloading:
            assert start["start"] == "cold"
            assert start["cold_reason"] == COLD_IN_CONTAINER
        else:
            assert "start" not in start
            assert "cold_reason" not in start
