"""The seal on /_control and /_oracle, driven through the app without sockets."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_providers.app import ProviderApp, Reply, Request
from fake_providers.faults import FaultBoard
from fake_providers.models import Fault
from fake_providers.problems import PROBLEM_TYPE
from fake_providers.seal import SECRET_HEADER, authorized, is_sealed, make_secret, read_secret
from fake_providers.store import Store

SECRET = "s3cret-s3cret-s3cret"
KEY = {SECRET_HEADER.lower(): SECRET}
JSON = {"content-type": "application/json"}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[ProviderApp]:
    store = Store(tmp_path / "p.db", provider="billing")
    board = FaultBoard(hold_max_s=30.0)
    yield ProviderApp(kind="idempotent", name="billing", store=store, board=board, secret=SECRET)
    board.close()
    store.close()


def call(app: ProviderApp, method: str, target: str, body: Any = None, **headers: str) -> Reply:
    raw = b"" if body is None else json.dumps(body).encode()
    return app.handle(Request(method, target, {**JSON, **headers}, raw, peer_pid=4242))


def harness(app: ProviderApp, method: str, target: str, body: Any = None) -> Reply:
    return call(app, method, target, body, **KEY)


def denied(app: ProviderApp) -> list[dict[str, Any]]:
    arrivals = json.loads(harness(app, "GET", "/_oracle/arrivals").body)
    return [a for a in arrivals if a["kind"] == "control_denied"]


ATTEMPTS = [
    ("POST", "/_control/faults", {"action": "fail_before_commit"}),
    ("GET", "/_oracle/arrivals", None),
    ("GET", "/_oracle/effects", None),
    ("POST", "/_control/reset", None),
    ("POST", "/_control/wipe", None),
    ("DELETE", "/_control/faults", None),
    ("GET", "/_control/health", None),
    ("POST", "/_control/faults/f-1/release", {"outcome": "drop"}),
    ("GET", "/_control/nothing-here", None),
    ("PUT", "/_oracle", None),
]


@pytest.mark.parametrize(("method", "target", "body"), ATTEMPTS)
@pytest.mark.parametrize("secret", [None, "wrong", SECRET + "x", "é-not-ascii"])
def test_without_the_secret_every_sealed_call_is_403_and_recorded(
    app: ProviderApp, method: str, target: str, body: Any, secret: str | None
) -> None:
    headers = {} if secret is None else {SECRET_HEADER.lower(): secret}
    reply = call(app, method, target, body, **headers, **{"x-worker-id": "w-7"})
    assert reply.status == 403
    assert reply.content_type == PROBLEM_TYPE
    doc = json.loads(reply.body)
    assert SECRET_HEADER in doc["detail"]
    assert "this attempt is recorded" in doc["detail"]
    [attempt] = denied(app)
    assert {k: attempt[k] for k in ("method", "path", "worker_id", "peer_pid", "status")} == {
        "method": method,
        "path": target,
        "worker_id": "w-7",
        "peer_pid": 4242,
        "status": 403,
    }
    assert (attempt["committed"], attempt["job_id"], attempt["provider"]) == (
        False,
        None,
        "billing",
    )


def test_a_denied_call_changes_nothing(app: ProviderApp) -> None:
    fault_id = app.board.arm(Fault("fail_before_commit", job="j-1"))
    before = app.board.snapshot()
    for method, target, body in ATTEMPTS:
        call(app, method, target, body)
    assert app.board.snapshot() == before
    assert json.loads(harness(app, "GET", "/_control/faults").body)[0]["id"] == fault_id


def test_the_secret_opens_every_sealed_route(app: ProviderApp) -> None:
    armed = harness(app, "POST", "/_control/faults", {"action": "fail_lookup"})
    assert armed.status == 201
    assert harness(app, "GET", "/_control/health").status == 200
    assert harness(app, "GET", "/_oracle/effects").status == 200
    assert harness(app, "POST", "/_control/reset").status == 200
    assert denied(app) == []


def test_the_business_api_and_the_description_need_no_secret(app: ProviderApp) -> None:
    write = call(app, "POST", "/v1/effects", {"job_id": "j-1"}, **{"idempotency-key": "k"})
    assert write.status == 201
    assert call(app, "GET", "/v1/effects?idempotency_key=k").status == 200
    assert call(app, "GET", "/openapi.json").status == 200
    assert denied(app) == []


def test_an_unsealed_app_answers_everyone(tmp_path: Path) -> None:
    store = Store(tmp_path / "open.db", provider="open")
    app = ProviderApp(kind="plain", name="open", store=store)
    assert call(app, "GET", "/_oracle/arrivals").status == 200
    store.close()


def test_the_sender_is_worth_a_pid_lookup_only_when_it_is_not_the_harness(
    app: ProviderApp,
) -> None:
    assert app.wants_peer_pid("/v1/effects", {})
    assert app.wants_peer_pid("/_control/reset", {})
    assert app.wants_peer_pid("/_control/reset", {SECRET_HEADER.lower(): "guess"})
    assert not app.wants_peer_pid("/_control/reset", KEY)
    assert not app.wants_peer_pid("/openapi.json", {})


def test_seal_helpers() -> None:
    assert is_sealed("/_control/faults")
    assert is_sealed("/_oracle")
    assert not is_sealed("/v1/effects")
    assert not is_sealed("/openapi.json")
    assert authorized({}, None)
    assert not authorized({}, "s")
    assert authorized({"x-crashpoint-secret": "s"}, "s")
    a, b = make_secret(), make_secret()
    assert a != b
    assert len(a) >= 40


def test_read_secret_takes_one_line_and_leaves_the_rest() -> None:
    r, w = os.pipe()
    try:
        os.write(w, b"abc-123\nmore")
        assert read_secret(r) == "abc-123"
        assert os.read(r, 16) == b"more"
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.parametrize(
    ("data", "message"),
    [(b"", "stdin closed"), (b"  \n", "empty"), (b"x" * 2000, "longer than")],
)
def test_read_secret_refuses_what_no_launcher_writes(data: bytes, message: str) -> None:
    r, w = os.pipe()
    try:
        os.write(w, data)
        os.close(w)
        w = -1
        with pytest.raises(ValueError, match=message):
            read_secret(r)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
