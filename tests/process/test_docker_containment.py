"""Docker backend: a worker's whole tree lives and dies with its container.

The same escaping trees as tests/process/test_containment.py, in containers of the local
base image: a double-forked ``setsid`` daemon, a SIGTERM-ignoring worker, children that
fork further. The host's process table is scanned for the test's marker afterwards.
"""

from __future__ import annotations

import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from treekit import (
    CHAIN,
    assert_frozen,
    fields_of,
    marked,
    start_tree,
    ticks_again,
    until,
)

from harness.backends.cgroup import CONTAINER
from harness.backends.docker import DockerBackend, connect
from harness.contract.errors import InfrastructureError
from harness.history import History
from harness.pytest_plugin import missing

pytestmark = [pytest.mark.process, pytest.mark.docker]


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
    # Asks for the workdir so that it outlives the containers: torn down first, it was
    # removed while their processes still wrote ticks into it (Directory not empty).
    b = DockerBackend(client=client, history=History())
    yield b
    b.close()
    left = client.containers.list(
        all=True, filters={"label": f"crashpoint.run={b.run_id}"}, ignore_removed=True
    )
    assert left == []


def _tree(marker: str) -> list[psutil.Process]:
    """The worker's own processes (docker-init carries the worker's argv too)."""
    return [p for p in marked(marker) if p.name() != "docker-init"]


def _gone(marker: str) -> None:
    until(lambda: marked(marker) == [], what=f"every process marked {marker} to be gone")


def test_a_double_forked_setsid_daemon_dies_with_the_container(
    backend: DockerBackend, workdir: Path, marker: str
) -> None:
    handle = start_tree(backend, workdir, marker, "--daemon", roles=["w", "w-daemon"])
    assert len(_tree(marker)) == 2
    handle.signal(signal.SIGKILL)
    assert handle.wait(10) == -signal.SIGKILL
    _gone(marker)
    (start,) = fields_of(backend._history, "worker_start")
    assert start["containment"] == CONTAINER


def test_a_daemon_left_by_a_worker_that_exited_dies_with_its_init(
    backend: DockerBackend, workdir: Path, marker: str
) -> None:
    handle = start_tree(backend, workdir, marker, "--daemon", "--exit")
    assert handle.wait(15) == 0
    # The worker was the init's only child: init exits, and the kernel ends the namespace.
    _gone(marker)


def test_pause_freezes_the_grandchildren_and_the_daemon(
    backend: DockerBackend, workdir: Path, marker: str
) -> None:
    roles = [*CHAIN, "w-daemon"]
    handle = start_tree(backend, workdir, marker, "--daemon", "--spawn", "2", roles=roles)
    procs = _tree(marker)
    assert len(procs) == len(roles)
    # What the trial reads file locks and CPU time of: the init, and the daemon too.
    assert sorted(handle.tree()) == sorted(p.pid for p in marked(marker))
    handle.pause()
    until(lambda: handle._status() == "paused", what="the engine to report the pause")
    assert_frozen(workdir, roles, procs)
    handle.resume()
    ticks_again(workdir, roles)


def test_a_sigterm_ignoring_tree_is_escalated_to_sigkill(
    backend: DockerBackend, workdir: Path, marker: str
) -> None:
    handle = start_tree(
        backend,
        workdir,
        marker,
        "--ignore-term",
        "--daemon",
        "--spawn",
        "2",
        roles=[*CHAIN, "w-daemon"],
    )
    assert handle.stop(timeout_s=0.5) == -signal.SIGKILL
    _gone(marker)
    (escalation,) = fields_of(backend._history, "escalate")
    assert escalation["signal"] == "SIGTERM"
    assert escalation["grace_s"] == 0.5


def test_a_worker_that_exits_on_sigterm_is_not_escalated(
    backend: DockerBackend, workdir: Path, marker: str
) -> None:
    handle = start_tree(backend, workdir, marker, "--exit-on-term", roles=["w"])
    assert handle.stop(timeout_s=10.0) == 0
    assert fields_of(backend._history, "escalate") == []
    _gone(marker)
