"""How the worker classifies provider answers: no sockets, an in-memory transport."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from scenarios.worker.calls import ProviderCalls
from scenarios.worker.config import ProviderSpec

IDEMPOTENT = ProviderSpec("idempotent", "http://provider.test")
PLAIN = ProviderSpec("plain", "http://provider.test")


def calls_with(handler: Callable[[httpx.Request], httpx.Response]) -> ProviderCalls:
    return ProviderCalls(timeout_s=1.0, worker_id="w7", transport=httpx.MockTransport(handler))


def test_write_sends_key_token_worker_and_the_body_unchanged() -> None:
    seen: list[httpx.Request] = []

    def handler(r: httpx.Request) -> httpx.Response:
        seen.append(r)
        return httpx.Response(201, json={"id": 17})

    body = {"job_id": "j-0001", "amount": 3}
    result = calls_with(handler).write(IDEMPOTENT, body, key="effect-j-0001", marker=None, token=4)
    assert (result.kind, result.ref) == ("ok", "17")
    [r] = seen
    assert r.url.path == "/v1/effects"
    assert r.headers["Idempotency-Key"] == "effect-j-0001"
    assert (r.headers["X-Fencing-Token"], r.headers["X-Worker-Id"]) == ("4", "w7")
    assert json.loads(r.content) == body


def test_plain_write_adds_the_marker_and_no_key() -> None:
    seen: list[httpx.Request] = []

    def handler(r: httpx.Request) -> httpx.Response:
        seen.append(r)
        return httpx.Response(201, json={"id": 1})

    calls_with(handler).write(PLAIN, {"job_id": "j-1"}, key="effect-j-1", marker="cm-j-1", token=1)
    [r] = seen
    assert r.url.path == "/v1/sends"
    assert "Idempotency-Key" not in r.headers
    assert json.loads(r.content) == {"job_id": "j-1", "client_marker": "cm-j-1"}


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (200, "ok"),
        (201, "ok"),
        (409, "unknown"),
        (422, "conflict"),
        (500, "failed"),
        (503, "failed"),
        (400, "failed"),
    ],
)
def test_write_status_classes(status: int, kind: str) -> None:
    result = calls_with(lambda r: httpx.Response(status, json={})).write(
        IDEMPOTENT, {"job_id": "j"}, key="k", marker=None, token=1
    )
    assert result.kind == kind


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (httpx.ConnectError("refused"), "failed"),  # nothing was sent
        (httpx.ConnectTimeout("slow connect"), "failed"),
        (httpx.ReadTimeout("slow answer"), "unknown"),  # never "failed": it may have landed
        (httpx.WriteTimeout("slow send"), "unknown"),
        (httpx.ReadError("reset by peer"), "unknown"),
        (httpx.RemoteProtocolError("server disconnected"), "unknown"),
    ],
)
def test_transport_errors(exc: Exception, kind: str) -> None:
    def handler(r: httpx.Request) -> httpx.Response:
        raise exc

    result = calls_with(handler).write(IDEMPOTENT, {"job_id": "j"}, key="k", marker=None, token=1)
    assert result.kind == kind


@pytest.mark.parametrize(
    ("status", "doc", "outcome"),
    [
        (200, {"state": "completed", "response": {"status": 201, "body": {"id": 5}}}, "confirmed"),
        (200, {"state": "in_flight", "response": None}, "unavailable"),
        (200, {"state": "completed", "response": {"status": 422, "body": {}}}, "conflict"),
        (404, {}, "not_found"),
        (501, {}, "unqueryable"),
        (503, {}, "unavailable"),
    ],
)
def test_idempotent_lookup(status: int, doc: object, outcome: str) -> None:
    seen: list[httpx.Request] = []

    def handler(r: httpx.Request) -> httpx.Response:
        seen.append(r)
        return httpx.Response(status, json=doc)

    found = calls_with(handler).lookup(
        IDEMPOTENT, job_id="j-1", key="effect-j-1", marker="cm-j-1", token=2
    )
    assert found.outcome == outcome
    assert seen[0].url.params["idempotency_key"] == "effect-j-1"
    if outcome == "confirmed":
        assert found.ref == "5"


@pytest.mark.parametrize(
    ("matches", "outcome"),
    [([], "not_found"), ([{"id": 1}], "confirmed"), ([{"id": 1}, {"id": 2}], "conflict")],
)
def test_plain_lookup_counts_matches(matches: list[object], outcome: str) -> None:
    seen: list[httpx.Request] = []

    def handler(r: httpx.Request) -> httpx.Response:
        seen.append(r)
        return httpx.Response(200, json=matches)

    found = calls_with(handler).lookup(
        PLAIN, job_id="j-1", key="effect-j-1", marker="cm-j-1", token=2
    )
    assert found.outcome == outcome
    assert seen[0].url.params["client_marker"] == "cm-j-1"


def test_lookup_that_cannot_connect_is_unavailable_not_not_found() -> None:
    def handler(r: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    found = calls_with(handler).lookup(PLAIN, job_id="j", key="k", marker="m", token=1)
    assert found.outcome == "unavailable"


def test_a_bound_job_names_its_identity_and_a_refusal_is_unverified() -> None:
    seen: list[str | None] = []

    def handler(r: httpx.Request) -> httpx.Response:
        seen.append(r.headers.get("X-Crashpoint-Identity"))
        if r.method == "GET":
            return httpx.Response(401, json={"detail": "expired"})
        return httpx.Response(403, json={}, headers={"X-Crashpoint-Identity": "acct-9"})

    calls = calls_with(handler)
    sent = calls.write(IDEMPOTENT, {"job_id": "j-1"}, key="k", marker=None, token=1, identity="a1")
    assert (sent.kind, sent.reason, sent.identity_now) == ("unverified", "http_403", "acct-9")
    found = calls.lookup(IDEMPOTENT, job_id="j-1", key="k", marker="m", token=1, identity="a1")
    assert (found.outcome, found.reason, found.identity_now) == ("unverified", "http_401", None)
    assert seen == ["a1", "a1"]
    calls.write(IDEMPOTENT, {"job_id": "j-1"}, key="k", marker=None, token=1)
    assert seen[-1] is None  # an unbound job names none
