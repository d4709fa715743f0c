"""A wiped provider process is as fresh as a new one: nothing sent before the wipe (a
request still in a socket buffer, one held or delayed mid-request, one on a kept-alive
connection) lands in the store after it; and the pool that reuses providers this way."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fake_providers import Fault, ProviderPool, ProviderProcess, start_provider

pytestmark = pytest.mark.process


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[ProviderProcess]:
    p = start_provider("idempotent", state_path=tmp_path / "p.db", name="svc")
    yield p
    p.close()


def _address(p: ProviderProcess) -> tuple[str, int]:
    return ("127.0.0.1", p.port)


def _write(url: str, key: str, job: str = "j-1") -> httpx.Response:
    with httpx.Client(timeout=10.0) as http:
        headers = {"Idempotency-Key": key}
        return http.post(f"{url}/v1/effects", json={"job_id": job}, headers=headers)


def _post_bytes(key: str, body: bytes) -> bytes:
    return (
        f"POST /v1/effects HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def _served(conn: socket.socket) -> bytes:
    """Read one response's worth from ``conn`` (b"" when it was closed or reset)."""
    conn.settimeout(10.0)
    try:
        return conn.recv(65536)
    except (ConnectionResetError, BrokenPipeError):
        return b""


def _opened(p: ProviderProcess) -> socket.socket:
    """A connection the provider has accepted: one request answered on it already."""
    conn = socket.create_connection(_address(p), timeout=10.0)
    conn.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    head = _served(conn)
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
    body = head.split(b"\r\n\r\n", 1)[1]
    while len(body) < length:
        body += conn.recv(65536)
    return conn


def _fresh(p: ProviderProcess) -> None:
    """What a new provider shows: nothing recorded, and a write is arrival and effect 1."""
    assert p.client.arrivals() == []
    assert p.client.effects() == []
    r = _write(p.url, "k-after", job="j-after")
    assert r.status_code == 201, r.text
    assert r.json()["id"] == 1
    assert [(a.id, a.job_id) for a in p.client.arrivals()] == [(1, "j-after")]


def test_a_request_in_a_socket_buffer_across_a_wipe_never_lands(provider: ProviderProcess) -> None:
    body = json.dumps({"job_id": "j-before"}).encode()
    conn = _opened(provider)
    # Headers and half the body are in; the handler waits on the rest, as a request a
    # killed worker left in the socket buffer waits on nobody.
    request = _post_bytes("k-before", body)
    conn.sendall(request[: -len(body) // 2])
    with conn:
        provider.wipe()
        with contextlib.suppress(OSError):
            conn.sendall(request[-len(body) // 2 :])
        assert _served(conn) == b""  # dropped, as a stopped provider would
    _fresh(provider)
    assert not [a for a in provider.client.arrivals() if a.job_id == "j-before"]


def test_a_request_on_a_connection_kept_from_before_the_wipe_is_dropped(
    provider: ProviderProcess,
) -> None:
    conn = _opened(provider)
    with conn:
        provider.wipe()
        with contextlib.suppress(OSError):
            conn.sendall(_post_bytes("k-before", json.dumps({"job_id": "j-before"}).encode()))
        assert _served(conn) == b""
    _fresh(provider)


@pytest.mark.parametrize("action", ["hold_before_commit", "hold_after_commit"])
def test_a_held_request_is_dropped_by_the_wipe_and_leaves_nothing(
    provider: ProviderProcess, action: str
) -> None:
    fault_id = provider.client.arm(Fault(action, job="j-before"))
    answers: list[object] = []

    def send() -> None:
        try:
            answers.append(_write(provider.url, "k-before", job="j-before").status_code)
        except httpx.HTTPError as exc:
            answers.append(type(exc).__name__)

    t = threading.Thread(target=send)
    t.start()
    provider.client.wait_held(fault_id, 10.0)
    t0 = time.monotonic()
    provider.wipe()
    assert time.monotonic() - t0 < 3.0  # the hold was dropped, not waited out
    t.join(10.0)
    assert len(answers) == 1
    assert answers[0] != 201, answers
    _fresh(provider)
    assert provider.client.faults() == []


def test_a_delayed_request_is_cut_short_by_the_wipe(provider: ProviderProcess) -> None:
    provider.client.arm(Fault("delay_response", job="j-before", delay_s=120.0))
    done = threading.Event()

    def send() -> None:
        with contextlib.suppress(httpx.HTTPError):
            _write(provider.url, "k-before", job="j-before")
        done.set()

    t = threading.Thread(target=send)
    t.start()
    deadline = time.monotonic() + 10.0
    while not provider.client.arrivals() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert provider.client.arrivals(), "the delayed write never arrived"
    t0 = time.monotonic()
    provider.wipe()
    assert time.monotonic() - t0 < 3.0
    assert done.wait(10.0)
    t.join(10.0)
    _fresh(provider)


def test_a_provider_that_moves_on_a_wipe_is_gone_from_its_old_port(tmp_path: Path) -> None:
    p = start_provider("plain", state_path=tmp_path / "p.db", new_port_on_wipe=True)
    try:
        old = p.url
        p.wipe()
        assert p.url != old
        with pytest.raises(httpx.ConnectError), httpx.Client(timeout=5.0) as http:
            http.get(f"{old}/openapi.json")
        assert p.client.health()["kind"] == "plain"
        assert p.client.arrivals() == []
    finally:
        p.close()


# -- the pool --------------------------------------------------------------------------


def test_the_pool_hands_a_provider_back_fresh_and_reuses_its_process(tmp_path: Path) -> None:
    with ProviderPool(workdir=tmp_path) as pool:
        first = pool.lease("idempotent", name="svc")
        pid, url = first.pid, first.url
        assert _write(first.url, "k-1").status_code == 201
        first.client.configure(key_ttl_s=1.0)
        assert pool.give_back(first)
        again = pool.lease("idempotent", name="svc")
        assert again is first
        assert again.pid == pid
        assert again.url != url  # a new port: the trial before cannot reach it
        assert again.client.configure() == {"key_ttl_s": 86400.0}
        _fresh(again)
        # Another name or kind is another provider.
        other = pool.lease("idempotent", name="billing")
        assert other.pid != pid
        assert (pool.started, pool.reused) == (2, 1)
        state_dir = pool.dir
    assert not again.alive()
    assert not other.alive()
    assert not state_dir.exists()


def test_the_pool_never_reuses_a_provider_that_died_or_was_restarted(tmp_path: Path) -> None:
    with ProviderPool(workdir=tmp_path) as pool:
        killed = pool.lease("plain", name="svc")
        killed.kill()
        assert not pool.give_back(killed)
        restarted = pool.lease("plain", name="svc")
        assert restarted is not killed
        restarted.restart()  # as a trial does with a provider it found dead
        assert not pool.give_back(restarted)
        assert not restarted.alive()
        fresh = pool.lease("plain", name="svc")
        assert fresh is not restarted
        assert pool.reused == 0


def test_an_mcp_provider_serves_its_tools_on_its_new_port_after_a_wipe(tmp_path: Path) -> None:
    import asyncio

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def create(url: str, job: str) -> None:
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(10.0)) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http), cache=None) as c,
        ):
            args = {"ticket": {"job_id": job}, "idempotency_key": job}
            result = await c.call_tool("create_ticket", args)
            assert not result.is_error, result

    p = start_provider(
        "idempotent", state_path=tmp_path / "p.db", transport="mcp", new_port_on_wipe=True
    )
    try:
        asyncio.run(create(p.url, "j-before"))
        p.wipe()
        asyncio.run(create(p.url, "j-after"))
        assert [(e.id, e.job_id) for e in p.client.effects()] == [(1, "j-after")]
    finally:
        p.close()
