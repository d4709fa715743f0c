"""Finding Toxiproxy and driving its API (and a trial's links), with the wire replaced by a
fake APIConsumer."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
from toxiproxy.api import APIConsumer

from harness.contract.errors import ConfigError, InfrastructureError, ToxiproxyUnavailable
from harness.history import History
from harness.network import (
    INSTALL_HINT,
    NetworkFaults,
    ProxyHandle,
    ToxiproxyLocation,
    ToxiproxyServer,
    TrialNetwork,
    cached_binary,
    find_toxiproxy,
)
from harness.plan import Cell
from scenarios.table import BY_NAME


def _exe(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _hidden(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment where no Toxiproxy can be found."""
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty), "CRASHPOINT_CACHE": str(tmp_path / "cache"), **extra}


def test_hidden_binary_raises_with_reason_and_fix(tmp_path: Path) -> None:
    with pytest.raises(ToxiproxyUnavailable) as info:
        find_toxiproxy(env=_hidden(tmp_path))
    message = str(info.value)
    assert "no toxiproxy-server on PATH" in message
    assert "no Go toolchain" in message
    assert INSTALL_HINT in message
    # Each skipped network cell repeats it: one short line, never the PATH itself.
    assert str(tmp_path / "empty-bin") not in message
    assert "\n" not in message


def test_go_present_but_build_not_asked(tmp_path: Path) -> None:
    env = _hidden(tmp_path)
    _exe(Path(env["PATH"]) / "go")
    with pytest.raises(ToxiproxyUnavailable, match=r"Go is at .*once") as info:
        find_toxiproxy(env=env)
    assert str(tmp_path / "cache") in str(info.value)


def test_explicit_server_that_is_not_there_is_an_error(tmp_path: Path) -> None:
    env = _hidden(tmp_path, TOXIPROXY_SERVER=str(tmp_path / "nowhere"))
    _exe(cached_binary(env))  # present, but an explicit setting must not be overridden
    with pytest.raises(ToxiproxyUnavailable, match=r"TOXIPROXY_SERVER=.*nowhere"):
        find_toxiproxy(env=env)


def test_order_server_then_path_then_cache(tmp_path: Path) -> None:
    env = _hidden(tmp_path)
    cached = _exe(cached_binary(env))
    assert find_toxiproxy(env=env) == ToxiproxyLocation("cache", binary=cached)
    on_path = _exe(Path(env["PATH"]) / "toxiproxy-server")
    assert find_toxiproxy(env=env) == ToxiproxyLocation("PATH", binary=on_path)
    explicit = _exe(tmp_path / "mine" / "toxiproxy-server")
    env["TOXIPROXY_SERVER"] = str(explicit)
    assert find_toxiproxy(env=env) == ToxiproxyLocation("TOXIPROXY_SERVER", binary=explicit)


def test_cache_honours_crashpoint_cache(tmp_path: Path) -> None:
    assert cached_binary({"CRASHPOINT_CACHE": str(tmp_path)}) == (
        tmp_path / "toxiproxy-2.12.0" / "toxiproxy-server"
    )
    assert cached_binary({"HOME": "/h"}) == Path(
        "/h/.cache/crashpoint/toxiproxy-2.12.0/toxiproxy-server"
    )


def test_proxy_handle_addresses() -> None:
    handle = ProxyHandle("billing", "127.0.0.1:8001", "127.0.0.1:40123")
    assert (handle.host, handle.port, handle.url) == ("127.0.0.1", 40123, "http://127.0.0.1:40123")


class _Response:
    def __init__(self, status: int, body: Any) -> None:
        self.status_code = status
        self._body = body
        self.content = b"" if body is None else b"x"
        self.text = str(body)
        self.headers = {"Content-Type": "application/json"}

    def json(self) -> Any:
        return self._body


class FakeWire:
    """Stands in for the HTTP calls ``APIConsumer`` makes; records what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, int, dict[str, Any]]] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for method in ("get", "post", "delete"):
            monkeypatch.setattr(APIConsumer, method, classmethod(self._handler(method)))

    def _handler(self, method: str) -> Any:
        def call(cls: type, path: str, **kwargs: Any) -> _Response:
            self.calls.append((method, path, cls.host, cls.port, kwargs))  # type: ignore[attr-defined]
            if method == "post" and path == "/proxies":
                return _Response(201, {**kwargs["json"], "listen": "127.0.0.1:45678"})
            if method == "get" and path.endswith("/toxics"):
                return _Response(200, [{"name": "latency_downstream"}])
            if method == "get" and path.startswith("/proxies/"):
                return _Response(200, {"enabled": False})
            return _Response(204, None)

        return call


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> FakeWire:
    fake = FakeWire()
    fake.install(monkeypatch)
    return fake


def _server(port: int) -> ToxiproxyServer:
    server = ToxiproxyServer(ToxiproxyLocation("TOXIPROXY_URL", url=f"http://127.0.0.1:{port}"))
    server.port = port
    return server


def test_every_call_targets_its_own_server_with_a_timeout(wire: FakeWire) -> None:
    before = (APIConsumer.host, APIConsumer.port)
    a = NetworkFaults(_server(1111))
    b = NetworkFaults(_server(2222))
    a.proxy("one", "127.0.0.1:9000")
    b.proxy("two", "http://127.0.0.1:9001")
    assert [(c[2], c[3]) for c in wire.calls] == [("127.0.0.1", 1111), ("127.0.0.1", 2222)]
    assert all(c[4]["timeout"] > 0 for c in wire.calls)
    assert (APIConsumer.host, APIConsumer.port) == before, "class-level address must be restored"


def test_toxics_are_recorded_in_the_history(wire: FakeWire) -> None:
    history = History()
    faults = NetworkFaults(_server(1111), history=history)
    proxy = faults.proxy("billing", "127.0.0.1:9000")
    assert proxy.listen == "127.0.0.1:45678"
    name = faults.add_latency(proxy, 200, 10)
    faults.add_reset_peer(proxy, stream="upstream")
    faults.disable(proxy)
    faults.clear()  # removes the server-reported toxic and re-enables
    kinds = [(e.kind, e.fields["toxic"]) for e in history]
    assert kinds == [
        ("toxic_on", "latency_downstream"),
        ("toxic_on", "reset_peer_upstream"),
        ("toxic_on", "down"),
        ("toxic_off", "latency_downstream"),
        ("toxic_off", "down"),
    ]
    assert name == "latency_downstream"
    body = next(c[4]["json"] for c in wire.calls if c[1] == "/proxies/billing/toxics")
    assert body["attributes"] == {"latency": 200, "jitter": 10}


def test_bad_stream_is_refused_before_any_call(wire: FakeWire) -> None:
    faults = NetworkFaults(_server(1111))
    with pytest.raises(ConfigError, match="stream='sideways'"):
        faults.add_latency("p", 100, stream="sideways")
    assert wire.calls == []


def test_http_errors_become_infrastructure_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        APIConsumer, "post", classmethod(lambda cls, path, **kw: _Response(500, "boom"))
    )
    with pytest.raises(InfrastructureError, match=r"500.*boom"):
        NetworkFaults(_server(1111)).disable("p")


def test_unstarted_server_says_start_first() -> None:
    with pytest.raises(InfrastructureError, match="call start"):
        NetworkFaults(ToxiproxyServer()).disable("p")


def test_bad_upstream_is_a_config_error(wire: FakeWire) -> None:
    with pytest.raises(ConfigError, match="'nohost'"):
        NetworkFaults(_server(1111)).proxy("p", "nohost")


def test_trial_network_faults_the_link_it_names(wire: FakeWire) -> None:
    cell = Cell(BY_NAME["ledger_link_faults"], "ledger_latency", "plain", None, "postgres")
    net = TrialNetwork(_server(1111), cell)
    dsn = "postgresql://u:pw@db.local:5433/crashpoint"
    net.attach(history=History(), provider_url="http://127.0.0.1:9000", ledger_dsn=dsn)
    assert net.provider_url == "http://127.0.0.1:45678"
    assert net.ledger_dsn(dsn) == "postgresql://u:pw@127.0.0.1:45678/crashpoint"
    ledger = f"/proxies/ledger-{net.tag}"
    name = net.on("ledger", "latency", latency=300, stream="upstream")
    net.off("ledger", name)
    net.down()
    calls = [(c[0], c[1]) for c in wire.calls[2:]]  # after the two proxies were made
    assert calls == [
        ("post", f"{ledger}/toxics"),
        ("delete", f"{ledger}/toxics/latency_upstream"),
        ("post", f"/proxies/provider-{net.tag}"),
    ]
    toxic = wire.calls[2][4]["json"]
    assert (toxic["stream"], toxic["attributes"]) == ("upstream", {"latency": 300})
    assert wire.calls[4][4]["json"] == {"enabled": False}


def test_trial_network_without_a_ledger_proxy_refuses_ledger_faults(wire: FakeWire) -> None:
    cell = Cell(BY_NAME["ambiguous_timeout"], "toxic_latency", "plain", None)
    net = TrialNetwork(_server(1111), cell)
    net.attach(history=History(), provider_url="http://127.0.0.1:9000", ledger_dsn=None)
    assert net.ledger_dsn("sqlite:///x") == "sqlite:///x"
    with pytest.raises(ConfigError, match=r"no ledger proxy .*toxic_latency"):
        net.on("ledger", "reset_peer", timeout=0)
