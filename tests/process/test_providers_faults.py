"""Every control fault, observed from a real httpx client against a real provider."""

from __future__ import annotations

import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from fake_providers import Fault, ProviderProcess, start_provider

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


Start = Callable[..., ProviderProcess]


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    started: list[ProviderProcess] = []

    def _start(kind: str, *, key_ttl_s: float = 86400.0) -> ProviderProcess:
        path = tmp_path / f"{kind}-{len(started)}.db"
        p = start_provider(kind, state_path=path, key_ttl_s=key_ttl_s)
        started.append(p)
        return p

    yield _start
    for p in started:
        p.close()


def _write(
    p: ProviderProcess, job: str, *, key: str | None = None, marker: str = "m"
) -> httpx.Response:
    if p.kind == "idempotent":
        return HTTP.post(
            f"{p.url}/v1/effects", json={"job_id": job}, headers={"Idempotency-Key": key or job}
        )
    return HTTP.post(f"{p.url}/v1/sends", json={"job_id": job, "client_marker": marker})


class Background:
    """A write running in a thread, so the test can act while the provider holds it."""

    def __init__(self, fn: Callable[[], httpx.Response]) -> None:
        self.response: httpx.Response | None = None
        self.error: Exception | None = None
        self.done_at: float | None = None
        self._t = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._t.start()

    def _run(self, fn: Callable[[], httpx.Response]) -> None:
        try:
            self.response = fn()
        except Exception as exc:
            self.error = exc
        self.done_at = time.monotonic()

    def join(self) -> None:
        self._t.join(15.0)
        assert not self._t.is_alive(), "the held write never finished"


@pytest.mark.parametrize("kind", ["idempotent", "plain"])
def test_hold_before_commit_blocks_until_released(start: Start, kind: str) -> None:
    p = start(kind)
    fault_id = p.client.arm(Fault("hold_before_commit", job="j-1"))
    bg = Background(lambda: _write(p, "j-1"))
    held = p.client.wait_held(fault_id, timeout_s=10.0)
    assert (held.job_id, held.committed, held.effect_id) == ("j-1", False, None)
    assert p.client.effects() == []
    released_at = time.monotonic()
    assert p.client.release(fault_id, "commit") == 1
    bg.join()
    assert bg.response is not None
    assert bg.response.status_code == 201
    assert bg.done_at is not None
    assert bg.done_at >= released_at
    [effect] = p.client.effects()
    assert effect.arrival_id == held.arrival_id


def test_hold_before_commit_drop_commits_nothing(start: Start) -> None:
    p = start("idempotent")
    fault_id = p.client.arm(Fault("hold_before_commit", key="k"))
    bg = Background(lambda: _write(p, "j-1", key="k"))
    p.client.wait_held(fault_id, timeout_s=10.0)
    # While held, the key is in flight: a concurrent retry is told so, and a lookup agrees.
    assert _write(p, "j-1", key="k").status_code == 409
    look = HTTP.get(f"{p.url}/v1/effects", params={"idempotency_key": "k"})
    assert look.json() == {"state": "in_flight", "response": None}
    p.client.release(fault_id, "drop")
    bg.join()
    assert isinstance(bg.error, httpx.TransportError)
    assert p.client.effects() == []
    assert _write(p, "j-1", key="k").status_code == 201


def test_hold_after_commit_effect_exists_while_response_waits(start: Start) -> None:
    p = start("plain")
    fault_id = p.client.arm(Fault("hold_after_commit", marker="m-1"))
    bg = Background(lambda: _write(p, "j-1", marker="m-1"))
    held = p.client.wait_held(fault_id, timeout_s=10.0)
    assert held.committed
    [effect] = p.client.effects()
    assert effect.id == held.effect_id
    assert bg.done_at is None
    p.client.release(fault_id, "drop")
    bg.join()
    assert isinstance(bg.error, httpx.TransportError)
    assert len(p.client.effects()) == 1


def test_release_commits_after_the_client_was_killed(start: Start) -> None:
    # The main use of a hold: the worker dies while its request is held, and the
    # "ghost" request still commits when the harness releases it.
    p = start("idempotent")
    fault_id = p.client.arm(Fault("hold_before_commit", job="j-9"))
    code = (
        "import httpx,sys; httpx.post(sys.argv[1] + '/v1/effects', json={'job_id': 'j-9'},"
        " headers={'Idempotency-Key': 'k-9', 'X-Worker-Id': 'w-1'}, timeout=60)"
    )
    worker = subprocess.Popen([sys.executable, "-c", code, p.url])
    try:
        held = p.client.wait_held(fault_id, timeout_s=10.0)
        worker.kill()
        worker.wait(10.0)
        assert p.client.release(fault_id, "commit") == 1
    finally:
        worker.kill()
        worker.wait()
    deadline = time.monotonic() + 5.0
    while not p.client.effects() and time.monotonic() < deadline:
        time.sleep(0.01)
    [effect] = p.client.effects()
    assert effect.idempotency_key == "k-9"
    arrival = next(a for a in p.client.arrivals() if a.id == held.arrival_id)
    assert (arrival.worker_id, arrival.peer_pid, arrival.committed) == ("w-1", worker.pid, True)
    # A retry after the ghost commit replays it: the key did its job.
    retry = _write(p, "j-9", key="k-9")
    assert retry.headers["Idempotent-Replayed"] == "true"


def test_two_deliveries_held_at_once(start: Start) -> None:
    # duplicate_delivery: both deliveries of one job reach the provider concurrently.
    p = start("plain")
    fault_id = p.client.arm(Fault("hold_before_commit", job="j-1", times=2))
    first = Background(lambda: _write(p, "j-1", marker="a"))
    second = Background(lambda: _write(p, "j-1", marker="b"))
    held = p.client.wait_held_count(fault_id, 2, timeout_s=10.0)
    assert sorted(h.client_marker or "" for h in held) == ["a", "b"]
    assert p.client.release(fault_id, "commit", arrival_id=held[0].arrival_id) == 1
    assert p.client.release(fault_id, "drop") == 1
    first.join()
    second.join()
    [effect] = p.client.effects()
    assert effect.arrival_id == held[0].arrival_id


@pytest.mark.parametrize("kind", ["idempotent", "plain", "unqueryable"])
def test_drop_after_commit_gives_a_connection_error_with_the_effect_committed(
    start: Start, kind: str
) -> None:
    p = start(kind)
    p.client.arm(Fault("drop_after_commit", job="j-1"))
    with pytest.raises(httpx.TransportError):
        _write(p, "j-1")
    [effect] = p.client.effects()
    [arrival] = p.client.arrivals()
    assert (arrival.committed, arrival.status, arrival.fault) == (True, None, "drop_after_commit")
    assert arrival.effect_id == effect.id


def test_fail_before_commit_n_times_then_success(start: Start) -> None:
    p = start("idempotent")
    p.client.arm(Fault("fail_before_commit", times=2, status=502))
    statuses = [_write(p, "j-1", key="k").status_code for _ in range(3)]
    assert statuses == [502, 502, 201]
    assert len(p.client.effects()) == 1


def test_delay_response_is_measurable(start: Start) -> None:
    p = start("plain")
    p.client.arm(Fault("delay_response", delay_s=0.3))
    t0 = time.monotonic()
    assert _write(p, "j-1").status_code == 201
    delayed = time.monotonic() - t0
    t0 = time.monotonic()
    assert _write(p, "j-2").status_code == 201
    undelayed = time.monotonic() - t0
    assert delayed >= 0.3
    # The fault acted once: the next write is quicker by most of the delay (relative, so
    # a busy machine slowing both does not fail it).
    assert undelayed < delayed - 0.15


@pytest.mark.parametrize("kind", ["idempotent", "plain"])
def test_fail_lookup_answers_503_n_times(start: Start, kind: str) -> None:
    p = start(kind)
    assert _write(p, "j-1", key="k", marker="m").status_code == 201
    p.client.arm(Fault("fail_lookup", times=2))
    path, param = (
        ("/v1/effects", "idempotency_key")
        if kind == "idempotent"
        else ("/v1/sends", "client_marker")
    )
    value = "k" if kind == "idempotent" else "m"
    statuses = [HTTP.get(p.url + path, params={param: value}).status_code for _ in range(3)]
    assert statuses == [503, 503, 200]
    assert [a.fault for a in p.client.arrivals() if a.kind == "lookup"] == [
        "fail_lookup",
        "fail_lookup",
        None,
    ]


def test_reset_drops_held_requests(start: Start) -> None:
    p = start("plain")
    fault_id = p.client.arm(Fault("hold_before_commit"))
    bg = Background(lambda: _write(p, "j-1"))
    p.client.wait_held(fault_id, timeout_s=10.0)
    assert p.client.reset() == 1
    bg.join()
    assert isinstance(bg.error, httpx.TransportError)
    assert p.client.faults() == []
    assert p.client.effects() == []


def test_stop_is_prompt_while_a_request_is_held(start: Start) -> None:
    p = start("plain")
    fault_id = p.client.arm(Fault("hold_after_commit"))
    bg = Background(lambda: _write(p, "j-1"))
    p.client.wait_held(fault_id, timeout_s=10.0)
    t0 = time.monotonic()
    p.stop()
    assert time.monotonic() - t0 < 2.0
    assert not p.alive()
    bg.join()
    assert bg.error is not None


def test_keys_expire_after_ttl(start: Start) -> None:
    p = start("idempotent", key_ttl_s=0.3)
    assert _write(p, "j-1", key="k").status_code == 201
    replay = _write(p, "j-1", key="k")
    assert replay.headers.get("Idempotent-Replayed") == "true"
    time.sleep(0.35)
    fresh = _write(p, "j-1", key="k")
    assert fresh.status_code == 201
    assert "Idempotent-Replayed" not in fresh.headers
    assert len(p.client.effects()) == 2


def test_wait_held_times_out_when_nothing_matches(start: Start) -> None:
    from harness.contract.errors import RendezvousTimeout

    p = start("plain")
    fault_id = p.client.arm(Fault("hold_before_commit", job="j-other"))
    assert _write(p, "j-1").status_code == 201
    with pytest.raises(RendezvousTimeout, match=fault_id):
        p.client.wait_held(fault_id, timeout_s=0.2)


@pytest.mark.parametrize("kind", ["idempotent", "plain"])
def test_a_hold_is_committed_at_its_deadline_with_no_release_sent(start: Start, kind: str) -> None:
    # The provider lets go by itself: a harness slowed past the deadline (or gone) cannot
    # keep the request frozen longer. No release call is ever sent here.
    p = start(kind)
    fault_id = p.client.arm(Fault("hold_before_commit", job="j-1", release_after_s=1.0))
    bg = Background(lambda: _write(p, "j-1"))
    held = p.client.wait_held(fault_id, timeout_s=10.0)
    assert held.committed is False
    assert bg.done_at is None
    bg.join()
    assert bg.response is not None
    assert bg.response.status_code == 201
    [effect] = p.client.effects()
    assert effect.arrival_id == held.arrival_id
    assert effect.t_mono >= held.t_mono + 1.0
    # The provider's log says how and when it let go, on the clock held.t_mono is on.
    [release] = p.client.releases()
    assert (release["arrival_id"], release["outcome"], release["released_by"]) == (
        held.arrival_id,
        "commit",
        "deadline",
    )
    assert held.t_mono + 1.0 <= release["t_mono"] <= effect.t_mono
    # A release that comes after the deadline is harmless: nothing left to let go.
    assert p.client.release(fault_id, "drop") == 0
    assert len(p.client.effects()) == 1


def test_a_release_call_can_set_a_held_requests_deadline(start: Start) -> None:
    # The deadline known only once the hold is seen (a lease counted from a claim).
    p = start("idempotent")
    fault_id = p.client.arm(Fault("hold_before_commit", job="j-1"))
    bg = Background(lambda: _write(p, "j-1"))
    held = p.client.wait_held(fault_id, timeout_s=10.0)
    by = time.monotonic() + 0.5
    assert p.client.release(fault_id, "commit", by=by) == 1
    # A later deadline does not put it off: the earlier one wins.
    assert p.client.release(fault_id, "commit", by=by + 60.0) == 1
    bg.join()
    assert bg.response is not None
    assert bg.response.status_code == 201
    [release] = p.client.releases()
    assert release["released_by"] == "deadline"
    assert by <= release["t_mono"] < by + 30.0
    assert release["arrival_id"] == held.arrival_id


def test_a_harness_release_before_the_deadline_wins(start: Start) -> None:
    p = start("plain")
    fault_id = p.client.arm(
        Fault("hold_before_commit", job="j-1", release_after_s=60.0, release_outcome="commit")
    )
    bg = Background(lambda: _write(p, "j-1"))
    p.client.wait_held(fault_id, timeout_s=10.0)
    assert p.client.release(fault_id, "drop") == 1
    bg.join()
    assert isinstance(bg.error, httpx.TransportError)
    assert p.client.effects() == []
    [release] = p.client.releases()
    assert (release["outcome"], release["released_by"]) == ("drop", "harness")
