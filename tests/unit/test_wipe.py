"""A wipe makes a provider as fresh as a new start: store, board, identities, settings,
and the epochs that fence off every request of before (no sockets: plain objects)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_providers.app import ProviderApp, Request
from fake_providers.epochs import Epochs
from fake_providers.faults import FaultBoard, Hold
from fake_providers.models import Fault
from fake_providers.store import ArrivalIn, Store

JSON = {"content-type": "application/json"}


def _write(store: Store, key: str | None, job: str = "j-1") -> tuple[int, int]:
    arrival = store.record_arrival(ArrivalIn(kind="write", method="POST", path="/v1/effects"))
    if key is not None:
        assert store.reserve_key(key, "fp").outcome == "new"
    effect_id, _, _ = store.commit_effect(
        arrival_id=arrival,
        job_id=job,
        fingerprint="fp",
        key=key,
        respond=lambda e: (201, b"{}"),
    )
    return arrival, effect_id


# -- the store -----------------------------------------------------------------------


def test_a_wiped_store_holds_nothing_and_numbers_from_one(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db", provider="svc")
    _write(store, "k-1")
    _write(store, "k-2", job="j-2")
    store.reserve_key("k-3", "fp")  # left in flight
    store.wipe()
    assert store.arrivals() == []
    assert store.effects() == []
    assert store.key_state("k-1") is None
    assert store.key_state("k-3") is None
    # A key of before is a new request now, and ids start again as in a new file.
    assert _write(store, "k-1") == (1, 1)
    assert store.job_of("idempotency_key", "k-2") is None
    store.close()


def test_a_wipe_is_what_a_restart_finds(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db", provider="svc")
    _write(store, "k-1")
    store.wipe()
    _write(store, "k-2", job="j-2")
    store.close()
    again = Store(tmp_path / "p.db", provider="svc")
    assert [e["idempotency_key"] for e in again.effects()] == ["k-2"]
    assert [e["id"] for e in again.effects()] == [1]
    again.close()


# -- the fault board -----------------------------------------------------------------


def _held(board: FaultBoard, fault_id: str) -> Hold:
    return Hold(fault_id, "hold_after_commit", 1, None, None, None, True, 1)


def test_drain_drops_every_hold_and_holds_nothing_more_until_the_wipe() -> None:
    board = FaultBoard()
    fault_id = board.arm(Fault("hold_after_commit", times=2))
    armed = board.take(("hold_after_commit",), job=None, key=None, marker=None)
    assert armed is not None
    outcomes: list[str] = []
    t = threading.Thread(target=lambda: outcomes.append(board.hold(armed, _held(board, fault_id))))
    t.start()
    assert board.wait_held(fault_id, 10.0) is not None
    assert board.drain() == 1
    t.join(10.0)
    assert outcomes == ["drop"]
    # Draining: a request that reaches a hold now is dropped at once, a delay is none,
    # and a long poll answers at once.
    assert board.hold(armed, _held(board, fault_id)) == "drop"
    board.pause(300.0)
    again = board.arm(Fault("hold_after_commit"))
    assert board.wait_held(again, 300.0) is None
    board.wipe()
    assert board.snapshot() == []
    assert board.arm(Fault("fail_lookup")) == "f-1"


def test_a_drain_wakes_a_delay_in_progress() -> None:
    board = FaultBoard()
    started = threading.Event()

    def delayed() -> None:
        started.set()
        board.pause(300.0)

    t = threading.Thread(target=delayed)
    t.start()
    started.wait(10.0)
    board.drain()
    t.join(10.0)
    assert not t.is_alive()


# -- the control API -----------------------------------------------------------------


@pytest.fixture
def app(tmp_path: Path) -> Iterator[ProviderApp]:
    store = Store(tmp_path / "idem.db", provider="svc", key_ttl_s=600.0)
    board = FaultBoard(hold_max_s=30.0)
    yield ProviderApp(kind="idempotent", name="svc", store=store, board=board)
    board.close()
    store.close()


def _call(app: ProviderApp, method: str, target: str, body: object = None) -> tuple[int, object]:
    raw = b"" if body is None else json.dumps(body).encode()
    reply = app.handle(Request(method, target, JSON if body is not None else {}, raw))
    return reply.status, json.loads(reply.body) if reply.body else None


def _effect(app: ProviderApp, key: str, identity: str | None = None) -> int:
    headers = {**JSON, "idempotency-key": key}
    if identity is not None:
        headers["x-crashpoint-identity"] = identity
    body = json.dumps({"job_id": "j-1"}).encode()
    return app.handle(Request("POST", "/v1/effects", headers, body)).status


def test_a_wipe_forgets_everything_a_trial_left(app: ProviderApp) -> None:
    fresh = {
        path: _call(app, "GET", path)
        for path in (
            "/_oracle/arrivals",
            "/_oracle/effects",
            "/_control/faults",
            "/_control/identities",
            "/_control/settings",
        )
    }
    assert _effect(app, "k-1") == 201
    _call(app, "POST", "/_control/faults", {"action": "fail_before_commit", "job": "j-9"})
    _call(app, "POST", "/_control/identities", {"identity": "acct-1", "state": "expired"})
    _call(app, "POST", "/_control/settings", {"key_ttl_s": 5})
    assert _effect(app, "k-2", identity="acct-1") == 401
    status, doc = _call(app, "POST", "/_control/wipe")
    assert status == 200
    assert doc == {"url": None, "fenced": 0, "dropped": 0}
    assert {path: _call(app, "GET", path) for path in fresh} == fresh
    # Nothing of before acts: the key is new, the identity good, ids from 1.
    assert _effect(app, "k-1", identity="acct-1") == 201
    _, arrivals = _call(app, "GET", "/_oracle/arrivals")
    assert isinstance(arrivals, list)
    assert [(a["id"], a["status"], a["replayed"]) for a in arrivals] == [(1, 201, False)]
    _, armed = _call(app, "POST", "/_control/faults", {"action": "fail_lookup"})
    assert armed == {"fault_id": "f-1"}


class _Fence:
    """A server whose older requests do not end in time."""

    url = "http://127.0.0.1:1"

    def begin(self) -> int:
        return 2

    def wait(self) -> bool:
        return False


def test_a_wipe_that_cannot_fence_off_the_past_fails_and_forgets_nothing(
    app: ProviderApp,
) -> None:
    assert _effect(app, "k-1") == 201
    app.control.fence = _Fence()
    status, doc = _call(app, "POST", "/_control/wipe")
    assert status == 503, doc
    # Not fresh, so not claimed to be: the log is as it was, for whoever looks.
    _, effects = _call(app, "GET", "/_oracle/effects")
    assert isinstance(effects, list)
    assert len(effects) == 1


# -- epochs ----------------------------------------------------------------------------


def test_a_connection_of_before_the_wipe_is_refused_and_shut() -> None:
    epochs = Epochs()
    old, mine = object(), object()
    e_old = epochs.opened(old)
    e_mine = epochs.opened(mine)
    assert epochs.enter(mine, e_mine)  # the wipe's own request
    stale = epochs.advance()
    assert stale == [old]
    assert not epochs.enter(old, e_old)
    new = object()
    assert epochs.enter(new, epochs.opened(new))
    epochs.leave()


def test_the_wipe_waits_for_a_request_of_before_that_is_being_handled() -> None:
    epochs = Epochs()
    conn = object()
    inside, let_go, done = threading.Event(), threading.Event(), threading.Event()

    def handler() -> None:
        assert epochs.enter(conn, epochs.opened(conn))
        inside.set()
        let_go.wait(10.0)
        epochs.leave()
        done.set()

    t = threading.Thread(target=handler)
    t.start()
    inside.wait(10.0)
    epochs.advance()
    assert epochs.busy() == 1
    assert not epochs.wait_idle(0.0)
    let_go.set()
    assert epochs.wait_idle(10.0)
    assert done.is_set()
    t.join(10.0)
