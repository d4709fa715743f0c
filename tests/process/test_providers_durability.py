"""SIGKILL a provider while clients post: nothing it acknowledged may be lost."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fake_providers import ProviderProcess, start_provider

pytestmark = pytest.mark.process

CLIENTS = 4


@pytest.fixture(params=["idempotent", "plain"])
def provider(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProviderProcess]:
    p = start_provider(request.param, state_path=tmp_path / "state.db")
    yield p
    p.close()


def _post(c: httpx.Client, kind: str, job: str) -> httpx.Response:
    if kind == "idempotent":
        return c.post("/v1/effects", json={"job_id": job}, headers={"Idempotency-Key": job})
    return c.post("/v1/sends", json={"job_id": job, "client_marker": f"m-{job}"})


def test_acknowledged_effects_survive_sigkill(provider: ProviderProcess) -> None:
    acked: dict[str, bytes] = {}  # job -> the 201 body its client received
    lock = threading.Lock()
    stop = threading.Event()

    def client(n: int) -> None:
        with httpx.Client(base_url=provider.url, timeout=5.0) as c:
            for i in range(10_000):
                if stop.is_set():
                    return
                job = f"j-{n}-{i:05d}"
                try:
                    r = _post(c, provider.kind, job)
                except httpx.TransportError:
                    return  # the provider died under us: this write's outcome is unknown
                if r.status_code == 201:
                    with lock:
                        acked[job] = r.content

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10.0
    while len(acked) < 100 and time.monotonic() < deadline:
        time.sleep(0.01)
    provider.kill()  # SIGKILL while the clients are still posting
    stop.set()
    for t in threads:
        t.join(10.0)
    assert len(acked) >= 100, "clients never got going; the test proves nothing"

    provider.restart()
    port_before = provider.port
    effects = {e.job_id: e for e in provider.client.effects()}
    lost = sorted(set(acked) - set(effects))
    assert lost == [], f"{len(lost)} acknowledged effects lost, e.g. {lost[:3]}"
    assert provider.port == port_before
    # At most the writes in flight at the kill committed without an acknowledgement.
    assert len(effects) - len(acked) <= CLIENTS

    if provider.kind == "idempotent":
        # The keys survived too: a retry replays the very bytes the client got.
        with httpx.Client(base_url=provider.url) as c:
            for job in list(acked)[:20]:
                r = _post(c, "idempotent", job)
                assert r.headers["Idempotent-Replayed"] == "true"
                assert r.content == acked[job]
        assert len(provider.client.effects()) == len(effects)


def test_restart_reuses_port_and_state(provider: ProviderProcess) -> None:
    with httpx.Client(base_url=provider.url) as c:
        assert _post(c, provider.kind, "j-1").status_code == 201
    url, pid = provider.url, provider.pid
    provider.restart()
    assert provider.url == url
    assert provider.pid != pid
    assert [e.job_id for e in provider.client.effects()] == ["j-1"]
    with httpx.Client(base_url=provider.url) as c:
        assert _post(c, provider.kind, "j-2").status_code == 201
    assert [a.job_id for a in provider.client.arrivals()] == ["j-1", "j-2"]
