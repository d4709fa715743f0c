"""Hostile input gets a 4xx problem document, never a 500: what fuzzing the API found.

Each case was once a 500 ("provider bug: ..."), a 501, or a bad request accepted with a
200; some schemathesis found (tests/process/test_providers_fuzz.py), the rest turned up
while writing the OpenAPI description. Also: the description and the routes agree.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_providers.app import ProviderApp, Reply, Request
from fake_providers.faults import FaultBoard
from fake_providers.models import KINDS, Fault
from fake_providers.openapi import describe
from fake_providers.problems import PROBLEM_TYPE
from fake_providers.store import Store

JSON = {"content-type": "application/json"}


def _make(tmp_path: Path, kind: str) -> Iterator[ProviderApp]:
    store = Store(tmp_path / f"{kind}.db", provider=kind)
    board = FaultBoard(hold_max_s=30.0)
    yield ProviderApp(kind=kind, name=kind, store=store, board=board)
    board.close()
    store.close()


@pytest.fixture
def app(tmp_path: Path) -> Iterator[ProviderApp]:
    yield from _make(tmp_path, "idempotent")


def send(app: ProviderApp, method: str, target: str, raw: bytes = b"", **headers: str) -> Reply:
    return app.handle(Request(method, target, {**JSON, **headers}, raw))


def refused(reply: Reply, status: int = 400) -> dict[str, Any]:
    assert reply.status == status, reply.body
    assert reply.content_type == PROBLEM_TYPE
    doc: dict[str, Any] = json.loads(reply.body)
    assert "provider bug" not in doc["detail"]
    return doc


# -- query parameters -------------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [
        "/_oracle/arrivals?after=",  # present but empty was read as 0: a 200
        "/_oracle/arrivals?after=%C2%B2",  # "²" passes str.isdigit, then int() raised
        "/_oracle/arrivals?after=" + "9" * 5000,  # over int()'s 4300-digit limit
        "/_control/faults/f-1/held?timeout_s=",
        "/_control/faults/f-1/held?timeout_s=nan",  # NaN reached Condition.wait
        "/_control/faults/f-1/held?timeout_s=0&count=%C2%B2",
        "/_control/faults/f-1/held?timeout_s=0&count=0",
    ],
)
def test_bad_query_parameters_are_400(app: ProviderApp, target: str) -> None:
    app.board.arm(Fault("hold_after_commit"))
    refused(send(app, "GET", target))


def test_an_after_beyond_any_id_is_an_empty_page(app: ProviderApp) -> None:
    # Past SQLite's integer range the bound parameter overflowed: a 500.
    reply = send(app, "GET", "/_oracle/arrivals?after=" + "9" * 40)
    assert (reply.status, json.loads(reply.body)) == (200, [])


# -- bodies -----------------------------------------------------------------------------


DEEP = b"[" * 100_000 + b"]" * 100_000


def test_a_deeply_nested_write_body_is_400(app: ProviderApp) -> None:
    # json.loads raised RecursionError, which is no ValueError: a 500.
    doc = refused(send(app, "POST", "/v1/effects", DEEP, **{"idempotency-key": "k"}))
    assert "nests too deeply" in doc["detail"]
    [arrival] = app.store.arrivals()
    assert arrival["status"] == 400


def test_a_deeply_nested_control_body_is_400(app: ProviderApp) -> None:
    refused(send(app, "POST", "/_control/faults", DEEP))


def test_a_lone_surrogate_in_a_write_is_400(app: ProviderApp) -> None:
    # The fingerprint (and SQLite) encode UTF-8, which has no form for half a pair.
    raw = b'{"job_id": "j-\\ud800"}'
    doc = refused(send(app, "POST", "/v1/effects", raw, **{"idempotency-key": "k"}))
    assert "not valid Unicode" in doc["detail"]
    assert app.store.effects() == []


def test_a_surrogate_pair_is_fine(app: ProviderApp) -> None:
    raw = b'{"job_id": "j-\\ud83d\\ude00"}'
    assert send(app, "POST", "/v1/effects", raw, **{"idempotency-key": "k"}).status == 201
    assert app.store.effects()[0]["job_id"] == "j-\U0001f600"


# -- faults and releases ----------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        {"action": "fail_lookup", "status": 200},  # was armed, then answered as a 200
        {"action": "fail_lookup", "status": "503"},  # was armed, then a 500 on send
        {"action": "delay_response", "delay_s": 10_000},  # over --hold-max-s
        {"action": "fail_lookup", "job": ["j-1"]},
        {"action": "fail_lookup", "times": True},
    ],
)
def test_bad_faults_are_422(app: ProviderApp, fault: dict[str, Any]) -> None:
    refused(send(app, "POST", "/_control/faults", json.dumps(fault).encode()), 422)
    assert app.board.snapshot() == []


def test_a_nan_delay_is_refused(app: ProviderApp) -> None:
    # Python's json reads NaN; time.sleep(nan) raised after the effect was committed.
    refused(
        send(app, "POST", "/_control/faults", b'{"action":"delay_response","delay_s":NaN}'), 422
    )


def test_integral_floats_count_as_integers(app: ProviderApp) -> None:
    raw = b'{"action": "fail_before_commit", "times": 2.0, "status": 502.0}'
    assert send(app, "POST", "/_control/faults", raw).status == 201
    assert app.board.snapshot()[0]["fault"]["times"] == 2


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b'{"outcome": ["drop"]}', 422),
        (b'{"arrival_id": true}', 422),
        (b'{"arrival_id": "1"}', 422),
        (b'{"arrival_id": 1.0}', 409),  # an integer: accepted, and nothing is held
        (b'"drop"', 400),
    ],
)
def test_release_bodies(app: ProviderApp, body: bytes, status: int) -> None:
    fault_id = app.board.arm(Fault("hold_before_commit"))
    refused(send(app, "POST", f"/_control/faults/{fault_id}/release", body), status)


# -- methods and the description --------------------------------------------------------


@pytest.mark.parametrize("method", ["PUT", "QUERY", "TRACE", "HEAD"])
def test_an_unrouted_method_is_405_with_allow(app: ProviderApp, method: str) -> None:
    reply = send(app, method, "/v1/effects")
    refused(reply, 405)
    assert ("Allow", "POST, GET") in reply.headers


@pytest.fixture(params=KINDS)
def any_kind(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProviderApp]:
    yield from _make(tmp_path, request.param)


def test_every_described_operation_is_routed_and_answers_as_described(
    any_kind: ProviderApp,
) -> None:
    app = any_kind
    doc = describe(app.kind, hold_max_s=30.0)
    fault_id = app.board.arm(Fault("fail_lookup", job="none"))
    for path, item in doc["paths"].items():
        for method, op in item.items():
            target = path.replace("{fault_id}", fault_id) + "?timeout_s=0"
            reply = send(app, method.upper(), target)
            if reply.content_type == PROBLEM_TYPE:
                assert "no route" not in json.loads(reply.body)["detail"], (method, path)
            assert reply.status != 405, (method, path)
            documented = op["responses"]
            assert str(reply.status) in documented or f"{reply.status // 100}XX" in documented, (
                method,
                path,
                reply.status,
            )
    assert "security" not in doc["paths"]["/openapi.json"]["get"]
    sealed = [
        op
        for path, item in doc["paths"].items()
        if path.startswith(("/_control", "/_oracle"))
        for op in item.values()
    ]
    # 9, settings GET and POST, identities GET and POST, tools, wipe, releases
    assert len(sealed) == 16
    assert all(op["security"] == [{"secret": []}] and "403" in op["responses"] for op in sealed)


def test_the_description_is_json_and_names_the_hold_limit() -> None:
    doc = json.loads(json.dumps(describe("plain", hold_max_s=12.0)))
    delay = doc["components"]["schemas"]["Fault"]["properties"]["delay_s"]
    assert delay["maximum"] == 12.0
    with pytest.raises(ValueError, match="stripe"):
        describe("stripe")
