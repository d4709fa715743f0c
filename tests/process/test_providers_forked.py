"""A pool's providers, forked warm by its fork server: real forks, real signals."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx2
import psutil
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from fake_providers import ProviderPool
from fake_providers.forked import ForkedChild, ForkServer, ForkServerError
from harness.contract.errors import ProviderError

pytestmark = pytest.mark.process


def _server_pid(pool: ProviderPool) -> int:
    proc = pool.forks._proc
    assert proc is not None, "the fork server was never started"
    return proc.pid


def test_a_pool_forks_its_providers_from_one_fork_server(tmp_path: Path) -> None:
    with ProviderPool(workdir=tmp_path) as pool:
        a = pool.lease("idempotent", name="svc")
        b = pool.lease("plain", name="billing")
        server = _server_pid(pool)
        for p in (a, b):
            assert isinstance(p._proc, ForkedChild)
            proc = psutil.Process(p.pid)
            assert proc.ppid() == server
            assert os.getpgid(p.pid) == p.pid  # its own group: a kill reaches it alone
            assert proc.name() == f"provider {p.name}"[:15]
            # No signal left blocked by the fork (SIGCHLD is, around it, in the server).
            status = Path(f"/proc/{p.pid}/status").read_text()
            assert "SigBlk:\t0000000000000000" in status, status
        assert a.client.health()["kind"] == "idempotent"
        assert b.client.health() == {"ok": True, "kind": "plain", "name": "billing"}
        assert pool.forks.forked == 2
        pids = [a.pid, b.pid, server]
    assert not any(psutil.pid_exists(pid) and _running(pid) for pid in pids)


def test_the_fork_server_imports_the_mcp_sdk_once_for_every_mcp_provider(
    tmp_path: Path,
) -> None:
    # The SDK's compiled core is mapped into a process once it imports the SDK: the fork
    # server has it only after the first MCP provider was asked for, and keeps one thread
    # (a fork copies only the calling thread), so each MCP provider forks with it loaded.
    with ProviderPool(workdir=tmp_path) as pool:
        pool.lease("plain", name="chat")
        server = _server_pid(pool)
        assert "_pydantic_core" not in Path(f"/proc/{server}/maps").read_text()
        tickets = pool.lease("idempotent", name="tickets", transport="mcp")
        assert "_pydantic_core" in Path(f"/proc/{server}/maps").read_text()
        assert psutil.Process(server).num_threads() == 1
        again = pool.lease("idempotent", name="tickets", transport="mcp")
        assert pool.forks.forked == 3
        for n, p in enumerate((tickets, again)):
            doc = asyncio.run(_create_ticket(p.url, f"j-{n}"))
            assert doc["status"] == 201, doc
            assert [e.job_id for e in p.client.effects()] == [f"j-{n}"]


async def _create_ticket(url: str, job: str) -> dict[str, Any]:
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(10.0)) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http), cache=None) as c,
    ):
        result = await c.call_tool(
            "create_ticket", {"ticket": {"job_id": job}, "idempotency_key": job}
        )
        return dict(result.structured_content or {})


def test_a_forked_provider_reports_how_it_died(tmp_path: Path) -> None:
    with ProviderPool(workdir=tmp_path) as pool:
        p = pool.lease("plain", name="svc")
        assert p.returncode is None
        assert p.alive()
        os.killpg(p.pid, signal.SIGKILL)
        p._proc.wait(10.0)
        assert p.returncode == -signal.SIGKILL
        assert not p.alive()
        p.restart()  # as a trial does with a provider it found dead: forked again
        assert isinstance(p._proc, ForkedChild)
        assert p.client.health()["kind"] == "plain"
        p.stop()
        assert p.returncode == 0


def test_a_dead_provider_is_reaped_at_once_not_left_a_zombie(tmp_path: Path) -> None:
    with ProviderPool(workdir=tmp_path) as pool:
        pid = pool.lease("plain", name="svc").pid
        os.killpg(pid, signal.SIGKILL)
        # Nobody asks after it: the fork server reaps it on its SIGCHLD.
        deadline = time.monotonic() + 30.0
        while psutil.pid_exists(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not psutil.pid_exists(pid), psutil.Process(pid).status()


def test_a_provider_that_cannot_start_says_why_with_its_exit_status(tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with ProviderPool(workdir=tmp_path) as pool:
            with pytest.raises(ProviderError, match=r"exited with 1 before it was ready"):
                pool.lease("plain", name="svc", port=port)
            assert pool.lease("plain", name="svc").alive()  # the fork server goes on
    finally:
        taken.close()


def test_providers_are_launched_when_the_fork_server_is_gone(tmp_path: Path) -> None:
    with ProviderPool(workdir=tmp_path) as pool:
        forked = pool.lease("idempotent", name="svc")
        os.killpg(_server_pid(pool), signal.SIGKILL)
        launched = pool.lease("idempotent", name="svc")
        assert isinstance(launched._proc, subprocess.Popen)
        assert launched.client.health()["kind"] == "idempotent"
        # The forked one outlives its fork server: its pipes are ours, not the server's.
        assert forked.client.health()["kind"] == "idempotent"
        forked.stop()
        assert not forked.alive()


def test_a_bad_request_is_answered_and_the_fork_server_goes_on(tmp_path: Path) -> None:
    forks = ForkServer(tmp_path / "forks.log")
    try:
        with forks._lock:
            sock = forks._connected()
            reply, fds = forks._ask(sock, {"op": "nope"}, [])
            assert fds == []
            assert "unknown op 'nope'" in reply["error"]
            reply, _ = forks._ask(sock, {"op": "spawn", "settings": {}, "log": "x"}, [])
            assert "two descriptors" in reply["error"]
            sock.send(b"not json")
            reply, _ = forks._receive(sock, 10.0)
            assert "JSONDecodeError" in reply["error"]
            reply, _ = forks._ask(sock, {"op": "status", "pid": os.getpid()}, [])
            assert reply == {"code": None}  # not its child
    finally:
        forks.close()
    with pytest.raises(ForkServerError, match="not available"):
        forks.spawn({}, tmp_path / "p.log")


def test_the_fork_server_and_its_providers_stop_when_the_harness_dies(tmp_path: Path) -> None:
    # A harness that leases two providers, prints every pid, then waits to be killed.
    script = textwrap.dedent(
        f"""
        import json, sys, time
        from pathlib import Path
        from fake_providers import ProviderPool
        pool = ProviderPool(workdir=Path({str(tmp_path)!r}))
        ps = [pool.lease("plain", name="a"), pool.lease("plain", name="b")]
        print(json.dumps([pool.forks._proc.pid, *(p.pid for p in ps)]), flush=True)
        time.sleep(600)
        """
    )
    harness = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert harness.stdout is not None
        pids = json.loads(harness.stdout.readline())
        assert all(_running(pid) for pid in pids)
        harness.kill()
        harness.wait()
        # The fork server sees its socket's EOF, each provider its stdin's.
        deadline = time.monotonic() + 30.0
        while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not [pid for pid in pids if _running(pid)], "outlived the harness"
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
        if harness.stdout is not None:
            harness.stdout.close()


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_ctrl_c_before_the_childs_own_group_exists_still_ends_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CI run: SIGINT landed between the fork and the child's setsid(), so the group kill
    # found no group, and the child, waiting for its secret, held the run's exit forever.
    # Both halves of that window are reproduced here: the interrupt, and no group yet.
    import threading

    from fake_providers import launcher

    def interrupted(self: object, proc: object) -> None:
        raise KeyboardInterrupt

    def no_group_yet(pgid: int, sig: int) -> None:
        raise ProcessLookupError(pgid)

    monkeypatch.setattr(launcher.ProviderProcess, "_hand_secret", interrupted)
    monkeypatch.setattr(launcher.os, "killpg", no_group_yet)
    raised: list[BaseException] = []
    with ProviderPool(workdir=tmp_path) as pool:

        def lease() -> None:
            try:
                pool.lease("plain", name="svc")
            except BaseException as exc:  # the KeyboardInterrupt is the expected end
                raised.append(exc)

        thread = threading.Thread(target=lease, daemon=True)
        thread.start()
        thread.join(20.0)
        assert not thread.is_alive(), "the lease still waits for a child nobody killed"
        assert [type(e) for e in raised] == [KeyboardInterrupt]
        assert pool.forks.forked == 1
