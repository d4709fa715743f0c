"""Foundation: Toxiproxy, PostgreSQL and Docker really work on this machine."""

from __future__ import annotations

import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from harness.backends.docker import DockerBackend, connect
from harness.contract.errors import InfrastructureError, ToxiproxyUnavailable
from harness.network import NetworkFaults, ToxiproxyServer, find_toxiproxy
from harness.pytest_plugin import missing

pytestmark = pytest.mark.process


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="cp-") as d:
        yield Path(d)


@pytest.fixture
def echo_addr() -> Iterator[str]:
    """A one-connection-at-a-time TCP echo server."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    listener.close()


def _rtt(port: int) -> float:
    with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
        t0 = time.perf_counter()
        sock.sendall(b"x")
        assert sock.recv(1) == b"x"
        return time.perf_counter() - t0


@pytest.mark.toxiproxy
def test_toxiproxy_latency_through_a_proxy(pytestconfig: pytest.Config, echo_addr: str) -> None:
    try:
        location = find_toxiproxy()
    except ToxiproxyUnavailable as exc:
        missing(pytestconfig, str(exc))
    with ToxiproxyServer(location) as server, NetworkFaults(server) as faults:
        assert server.version() == "2.12.0"
        proxy = faults.proxy("echo", echo_addr)
        base = min(_rtt(proxy.port) for _ in range(3))
        faults.add_latency(proxy, 200)
        added = _rtt(proxy.port) - base
        assert 0.18 <= added <= 0.40, f"a 200 ms latency toxic added {added:.3f} s"
        pid = server.pid
    assert pid is not None
    assert not psutil.pid_exists(pid), "the Toxiproxy server outlived stop()"


@pytest.mark.postgres
def test_postgres_connection(pg_dsn: str) -> None:
    import psycopg

    with psycopg.connect(pg_dsn, connect_timeout=3) as conn:
        row = conn.execute("SELECT current_setting('server_version_num')::int").fetchone()
    assert row is not None
    assert row[0] >= 120000


@pytest.fixture
def docker_client(pytestconfig: pytest.Config) -> Iterator[Any]:
    try:
        client = connect(timeout_s=5)
    except InfrastructureError as exc:
        missing(pytestconfig, str(exc))
    yield client
    client.close()


@pytest.mark.docker
def test_container_killed_with_sigkill(docker_client: Any, workdir: Path) -> None:
    with DockerBackend(client=docker_client) as backend:
        code = "import time; print('up', flush=True); time.sleep(60)"
        worker = backend.start(
            "sleeper", [sys.executable, "-c", code], env=dict(os.environ), cwd=workdir
        )
        deadline = time.monotonic() + 10
        while "up" not in worker.container.logs().decode():
            assert time.monotonic() < deadline, "the container never started its worker"
            time.sleep(0.02)
        worker.signal(signal.SIGKILL)
        assert worker.wait(10) == -signal.SIGKILL
        assert worker.engine_exit_code == 137
        run_id = backend.run_id
    leftovers = docker_client.containers.list(
        all=True, filters={"label": f"crashpoint.run={run_id}"}, ignore_removed=True
    )
    assert leftovers == []
