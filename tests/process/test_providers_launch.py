"""Starting, stopping and restarting providers; the ``serve`` command line."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from click.testing import CliRunner

from fake_providers import ProviderProcess, start_provider
from fake_providers.cli import serve
from harness.contract.errors import ProviderError

pytestmark = pytest.mark.process

#: One pooled client for the whole module; an empty TLS context skips loading the CA
#: bundle, which costs up to 200 ms per client on a loaded machine (providers are HTTP).
# Module-wide, so no kept-alive sockets: the providers it talks to are killed and gone
# long before the module's end, and a pooled socket would be left to the collector.
HTTP = httpx.Client(
    timeout=30.0,
    verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT),
    limits=httpx.Limits(max_keepalive_connections=0),
)


@pytest.fixture(scope="module", autouse=True)
def _close_http() -> Iterator[None]:
    yield
    HTTP.close()


#: The ``crashpoint`` command, run from this interpreter whether or not it is on PATH.
CRASHPOINT = (sys.executable, "-c", "from harness.cli import main; main()")


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[ProviderProcess]:
    p = start_provider("idempotent", state_path=tmp_path / "s.db", name="billing")
    yield p
    p.close()


def test_starts_well_under_half_a_second_of_cpu(tmp_path: Path) -> None:
    # Its own CPU time to ready, not the wall clock: with the test run three wide on two
    # cores, a launch waited 0.52 s for a CPU. What a start costs is the provider's to
    # keep small; how long a busy machine makes it wait is not (nox -s bench times that).
    with start_provider("plain", state_path=tmp_path / "s.db") as p:
        assert p.client.health()["kind"] == "plain"
        used = psutil.Process(p.pid).cpu_times()
    assert used.user + used.system < 0.5, used


def test_handle_describes_the_process(provider: ProviderProcess) -> None:
    assert provider.url == f"http://127.0.0.1:{provider.port}"
    assert (provider.kind, provider.name) == ("idempotent", "billing")
    assert provider.env() == {"CRASHPOINT_PROVIDER_BILLING_URL": provider.url}
    # Its own session and process group, so signals to it reach nothing else.
    assert os.getpgid(provider.pid) == provider.pid
    assert os.getsid(provider.pid) == provider.pid
    r = HTTP.post(
        f"{provider.url}/v1/effects", json={"job_id": "j-1"}, headers={"Idempotency-Key": "k"}
    )
    assert r.status_code == 201
    assert provider.client.effects()[0].provider == "billing"


def test_stop_and_kill_leave_no_process(tmp_path: Path) -> None:
    a = start_provider("plain", state_path=tmp_path / "a.db")
    b = start_provider("unqueryable", state_path=tmp_path / "b.db")
    a.stop()
    b.kill()
    for p in (a, b):
        assert not _running(p.pid)
        p.close()


def test_provider_stops_when_its_launcher_is_killed(tmp_path: Path) -> None:
    code = (
        "import sys; from fake_providers import start_provider;"
        "p = start_provider('plain', state_path=sys.argv[1]);"
        "print(p.pid, flush=True); sys.stdin.read()"
    )
    launcher = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "s.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert launcher.stdout is not None
    assert launcher.stdin is not None
    try:
        pid = int(launcher.stdout.readline())
        assert psutil.pid_exists(pid)
        launcher.kill()  # no atexit, no finalizer: only the pipe tells the provider
        launcher.wait(5.0)
        deadline = time.monotonic() + 5.0
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _running(pid), f"provider {pid} outlived its SIGKILLed launcher"
    finally:
        launcher.kill()
        launcher.wait()
        launcher.stdout.close()
        launcher.stdin.close()


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_stop_is_a_clean_exit(provider: ProviderProcess) -> None:
    provider.stop()
    assert provider.returncode == 0
    assert provider.log_path.read_text() == ""


def test_log_file_survives_a_kill(provider: ProviderProcess) -> None:
    provider.kill()
    assert provider.log_path.exists()


def test_restart_refuses_nothing_after_sigkill_on_the_same_port(provider: ProviderProcess) -> None:
    port = provider.port
    for _ in range(3):
        provider.kill()
        provider.restart()
        assert provider.port == port
        assert provider.client.health()["ok"] is True


def test_busy_port_is_a_provider_error_naming_the_port(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ProviderError, match=rf"port {port}.*Address already in use"):
            start_provider("plain", state_path=tmp_path / "s.db", port=port)


def test_missing_state_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match=r"state_path=.*nope.*create"):
        start_provider("plain", state_path=tmp_path / "nope" / "s.db")


def test_unopenable_state_is_one_clean_cli_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        serve, ["--kind", "plain", "--port", "0", "--state", str(tmp_path / "missing" / "s.db")]
    )
    assert result.exit_code == 1
    assert "cannot serve on 127.0.0.1:0 with state" in result.output
    assert "Traceback" not in result.output


def test_serve_prints_one_ready_line_and_stops_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            *CRASHPOINT,
            *("provider", "serve", "--kind", "plain", "--port", "0", "--name", "mail"),
            *("--state", str(tmp_path / "s.db")),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["ready"] is True
        assert ready["pid"] == proc.pid
        assert ready["url"].startswith("http://127.0.0.1:")
        health = HTTP.get(
            ready["url"] + "/_control/health", headers={"X-Crashpoint-Secret": ready["secret"]}
        )
        assert health.json()["name"] == "mail"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(5.0) == 0
        assert proc.stdout.read() == ""
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "example.com"])
def test_serve_refuses_non_loopback_hosts(tmp_path: Path, host: str) -> None:
    result = CliRunner().invoke(
        serve, ["--kind", "plain", "--state", str(tmp_path / "s.db"), "--host", host]
    )
    assert result.exit_code == 2
    assert f"'{host}' is not a loopback address" in result.output


def test_unknown_kind_is_refused(tmp_path: Path) -> None:
    # "stripe" names a persona now; a kind nothing serves is refused before any start.
    with pytest.raises(ProviderError, match="kind='strpe'"):
        start_provider("strpe", state_path=tmp_path / "s.db")
    with pytest.raises(ProviderError, match="persona='slack' is not a persona over"):
        start_provider("idempotent", persona="slack", state_path=tmp_path / "s.db")


def test_malformed_http_gets_problem_json(provider: ProviderProcess) -> None:
    with socket.create_connection(("127.0.0.1", provider.port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.x\r\n\r\n")
        head = s.recv(4096).decode()
    assert head.startswith("HTTP/1.")
    assert "400" in head.splitlines()[0]
    assert "application/problem+json" in head


def test_oversized_body_is_413(provider: ProviderProcess) -> None:
    r = HTTP.post(
        f"{provider.url}/v1/effects",
        content=b"x" * (2 << 20),
        headers={"Idempotency-Key": "k", "Content-Type": "application/json"},
    )
    assert r.status_code == 413
    assert r.headers["content-type"] == "application/problem+json"
