"""Each toxic really acts on a TCP echo round trip through a real Toxiproxy server."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from harness.contract.errors import ToxiproxyUnavailable
from harness.history import History
from harness.network import (
    NetworkFaults,
    ProxyHandle,
    ToxiproxyLocation,
    ToxiproxyServer,
    find_toxiproxy,
)
from harness.pytest_plugin import missing

pytestmark = [pytest.mark.process, pytest.mark.toxiproxy]


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            while data := self.request.recv(4096):
                self.request.sendall(data)
        except OSError:
            pass  # toxics reset connections on purpose


class EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture(scope="module")
def echo() -> Iterator[str]:
    server = EchoServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(scope="module")
def location(pytestconfig: pytest.Config) -> ToxiproxyLocation:
    try:
        return find_toxiproxy()
    except ToxiproxyUnavailable as exc:
        missing(pytestconfig, str(exc))
        raise


@pytest.fixture(scope="module")
def server(location: ToxiproxyLocation) -> Iterator[ToxiproxyServer]:
    with ToxiproxyServer(location) as s:
        yield s


@pytest.fixture
def faults(server: ToxiproxyServer) -> Iterator[NetworkFaults]:
    with NetworkFaults(server, history=History()) as f:
        yield f
    server.reset()


def round_trip(proxy: ProxyHandle, *, timeout_s: float = 3.0) -> tuple[float, bytes]:
    with socket.create_connection((proxy.host, proxy.port), timeout=timeout_s) as sock:
        t0 = time.perf_counter()
        sock.sendall(b"ping")
        data = sock.recv(16)
        return time.perf_counter() - t0, data


def test_latency_is_added(faults: NetworkFaults, echo: str) -> None:
    proxy = faults.proxy("echo_latency", echo)
    base, data = round_trip(proxy)
    assert data == b"ping"
    faults.add_latency(proxy, 200)
    delayed, data = round_trip(proxy)
    assert data == b"ping"
    assert 0.18 <= delayed - base <= 0.40, f"200 ms toxic added {delayed - base:.3f} s"


def test_latency_can_be_updated_in_place(faults: NetworkFaults, echo: str) -> None:
    proxy = faults.proxy("echo_update", echo)
    name = faults.add_latency(proxy, 300)
    faults.update_toxic(proxy, name, {"latency": 50})
    delayed, _ = round_trip(proxy)
    assert 0.04 <= delayed <= 0.25


def test_reset_peer_resets(faults: NetworkFaults, echo: str) -> None:
    proxy = faults.proxy("echo_reset", echo)
    faults.add_reset_peer(proxy)
    with pytest.raises(ConnectionResetError):
        round_trip(proxy)


def test_timeout_toxic_ends_in_eof(faults: NetworkFaults, echo: str) -> None:
    proxy = faults.proxy("echo_timeout", echo)
    faults.add_timeout(proxy, 300)
    elapsed, data = round_trip(proxy)
    assert data == b"", "the timeout toxic must close the connection without data"
    assert 0.25 <= elapsed <= 1.0


def test_disabled_proxy_refuses_then_recovers(faults: NetworkFaults, echo: str) -> None:
    proxy = faults.proxy("echo_down", echo)
    faults.disable(proxy)
    with pytest.raises(ConnectionRefusedError):
        round_trip(proxy)
    faults.enable(proxy)
    assert round_trip(proxy)[1] == b"ping"


def test_clear_removes_every_toxic(faults: NetworkFaults, echo: str) -> None:
    proxy = faults.proxy("echo_clear", echo)
    faults.add_latency(proxy, 500)
    faults.add_reset_peer(proxy, 1000, stream="upstream")
    faults.disable(proxy)
    faults.clear()
    assert faults.toxics(proxy) == []
    elapsed, data = round_trip(proxy)
    assert data == b"ping"
    # Clear of the 500 ms latency (bounded by what it tells apart, not by how quick a
    # round trip is: the test run shares two cores three ways).
    assert elapsed < 0.4


def test_two_servers_in_one_process(location: ToxiproxyLocation, echo: str) -> None:
    """toxiproxy-python keeps one address per process; ours must not mix servers up."""
    with ToxiproxyServer(location) as a, ToxiproxyServer(location) as b:
        fa, fb = NetworkFaults(a), NetworkFaults(b)
        pa = fa.proxy("same_name", echo)
        pb = fb.proxy("same_name", echo)  # would conflict if both went to one server
        fa.add_latency(pa, 200)
        plain, slowed = round_trip(pb)[0], round_trip(pa)[0]
        assert slowed >= 0.18
        # The latency is a's alone: b's round trip is shorter by most of it, however busy
        # the machine makes both.
        assert plain < slowed - 0.1


def test_attach_to_a_running_server_by_url(server: ToxiproxyServer, echo: str) -> None:
    location = find_toxiproxy(env={"TOXIPROXY_URL": server.url})
    assert location.source == "TOXIPROXY_URL"
    with ToxiproxyServer(location) as attached:
        assert attached.pid is None
        assert attached.version() == server.version()
    assert server.version(), "stopping an attached server must leave it running"


def test_url_that_does_not_answer_is_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        port = sock.getsockname()[1]
        with pytest.raises(ToxiproxyUnavailable, match=f"TOXIPROXY_URL='http://127.0.0.1:{port}'"):
            find_toxiproxy(env={"TOXIPROXY_URL": f"http://127.0.0.1:{port}"})
