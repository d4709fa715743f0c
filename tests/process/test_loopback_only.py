"""Every server the harness starts listens on loopback only, never on a network.

The listening sockets are read from the kernel (psutil, i.e. /proc/net) for the very
processes that serve: providers, the Toxiproxy server and its proxies, and the harness
itself, whose failpoint rendezvous is a UNIX socket and no TCP port at all. Once with
each server started directly, once by sampling every process of a real network trial.
"""

from __future__ import annotations

import ipaddress
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from trialkit import describe, run_cell

from fake_providers import ProviderProcess, start_provider
from harness.contract.errors import ToxiproxyUnavailable
from harness.history import History
from harness.network import NetworkFaults, ToxiproxyLocation, ToxiproxyServer, find_toxiproxy
from harness.pytest_plugin import missing
from harness.rendezvous import Rendezvous

pytestmark = [pytest.mark.process, pytest.mark.toxiproxy]


@dataclass(frozen=True)
class Listener:
    pid: int
    name: str
    ip: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}[{self.pid}] on {self.ip}:{self.port}"


def loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_loopback


def listeners(pids: set[int]) -> set[Listener]:
    """Every TCP/UDP socket in LISTEN state held by ``pids`` (gone processes skipped)."""
    out = set()
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            name = proc.name()
            conns = proc.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        for c in conns:
            if c.status == psutil.CONN_LISTEN and c.laddr:
                out.add(Listener(pid, name, c.laddr.ip, c.laddr.port))
    return out


def exposed(found: set[Listener]) -> list[str]:
    return sorted(str(x) for x in found if not loopback(x.ip))


@pytest.fixture(scope="module")
def location(pytestconfig: pytest.Config) -> ToxiproxyLocation:
    try:
        return find_toxiproxy()
    except ToxiproxyUnavailable as exc:
        missing(pytestconfig, str(exc))
        raise


@pytest.fixture
def providers(tmp_path: Path) -> Iterator[list[ProviderProcess]]:
    started = [start_provider(k, state_path=tmp_path / f"{k}.db") for k in ("idempotent", "plain")]
    started.append(start_provider("unqueryable", state_path=tmp_path / "u.db"))
    yield started
    for p in started:
        p.close()


def test_the_check_tells_loopback_from_a_network() -> None:
    assert all(map(loopback, ["127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"]))
    assert not any(map(loopback, ["0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "fe80::1%eth0"]))


def test_providers_toxiproxy_and_rendezvous_listen_on_loopback_only(
    providers: list[ProviderProcess], location: ToxiproxyLocation, tmp_path: Path
) -> None:
    sock = tmp_path / "fp.sock"
    before = listeners({os.getpid()})
    with (
        ToxiproxyServer(location) as server,
        NetworkFaults(server, history=History()) as faults,
        Rendezvous(sock),
    ):
        proxy = faults.proxy("billing", providers[0].url)
        toxiproxy = server.pid
        if toxiproxy is None:
            pytest.skip("Toxiproxy runs elsewhere (TOXIPROXY_URL); its process is not ours")
        pids = {p.pid for p in providers} | {toxiproxy, os.getpid()}
        found = listeners(pids)
        unix_paths = {c.laddr for c in psutil.Process().net_connections(kind="unix")}
    assert exposed(found) == []
    # The check saw every server it should have: one port per provider, and the
    # Toxiproxy API and proxy ports.
    by_pid = {pid: {x.port for x in found if x.pid == pid} for pid in pids}
    for p in providers:
        assert by_pid[p.pid] == {p.port}, found
    assert {server.port, proxy.port} <= by_pid[toxiproxy], found
    # The rendezvous is a UNIX socket: the harness opens no TCP listener for it.
    assert str(sock) in unix_paths
    assert {x for x in found if x.pid == os.getpid()} == before, found


def test_nothing_listens_beyond_loopback_during_a_network_trial(
    location: ToxiproxyLocation,
) -> None:
    me = psutil.Process()
    seen: set[Listener] = set()
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            try:
                pids = {me.pid} | {c.pid for c in me.children(recursive=True)}
            except psutil.Error:
                continue
            seen.update(listeners(pids))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, name="listen-sampler", daemon=True)
    sampler.start()
    try:
        result = run_cell("reset_after_commit", "toxic_reset_peer", "plain")
    finally:
        done.set()
        sampler.join(10)
    assert result.verdict == "held", describe(result)
    assert exposed(seen) == []
    names = {x.name for x in seen}
    # The sampler caught the run's servers: a provider (named so by its fork server, or
    # a launched ``python``), and Toxiproxy if it is ours.
    assert any(n.startswith(("provider", "python")) for n in names), seen
    if location.binary is not None:
        assert any("toxiproxy" in n for n in names), seen
