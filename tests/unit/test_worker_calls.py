"""How the worker classifies provider answers: no sockets, an in-memory connection."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from scenarios.worker.calls import ProviderCalls
from scenarios.worker.config import ProviderSpec
from scenarios.worker.http import IncompleteRead, RemoteDisconnected, Transport

IDEMPOTENT = ProviderSpec("idempotent", "http://provider.test")
PLAIN = ProviderSpec("plain", "http://provider.test")


@dataclass
class Sent:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes | None

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    def param(self, name: str) -> str:
        return parse_qs(urlsplit(self.target).query)[name][0]


@dataclass
class Answer:
    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)

    def read(self) -> bytes:
        return self.body

    def getheaders(self) -> list[tuple[str, str]]:
        return self.headers


#: A handler answers a request with ``(status, json)`` or ``(status, json, headers)``, or
#: raises what the socket would.
Handler = Callable[[Sent], tuple[int, Any] | tuple[int, Any, dict[str, str]]]


@dataclass
class FakeConnection:
    handler: Handler
    refuse: OSError | None = None
    seen: list[Sent] = field(default_factory=list)
    closed: bool = False
    _reply: tuple[int, Any] | tuple[int, Any, dict[str, str]] | None = None

    def connect(self) -> None:
        if self.refuse is not None:
            raise self.refuse

    def request(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        headers: Mapping[str, str] = {},
    ) -> None:
        sent = Sent(method, url, dict(headers), body)
        self.seen.append(sent)
        self._reply = self.handler(sent)

    def getresponse(self) -> Answer:
        assert self._reply is not None
        status, doc = self._reply[0], self._reply[1]
        headers = list(self._reply[2].items()) if len(self._reply) == 3 else []
        return Answer(status, json.dumps(doc).encode(), headers)

    def close(self) -> None:
        self.closed = True


def calls_with(handler: Handler, *, refuse: OSError | None = None) -> ProviderCalls:
    conn = FakeConnection(handler, refuse=refuse)
    transport = Transport(timeout_s=1.0, connect=lambda host, port, timeout: conn)
    calls = ProviderCalls(timeout_s=1.0, worker_id="w7", transport=transport)
    calls.conn = conn  # type: ignore[attr-defined]
    return calls


def test_write_sends_key_token_worker_and_the_body_unchanged() -> None:
    seen: list[Sent] = []

    def handler(r: Sent) -> tuple[int, Any]:
        seen.append(r)
        return 201, {"id": 17}

    body = {"job_id": "j-0001", "amount": 3}
    result = calls_with(handler).write(IDEMPOTENT, body, key="effect-j-0001", marker=None, token=4)
    assert (result.kind, result.ref) == ("ok", "17")
    [r] = seen
    assert (r.method, r.path) == ("POST", "/v1/effects")
    assert r.headers["Idempotency-Key"] == "effect-j-0001"
    assert (r.headers["X-Fencing-Token"], r.headers["X-Worker-Id"]) == ("4", "w7")
    assert r.body is not None
    assert json.loads(r.body) == body


def test_plain_write_adds_the_marker_and_no_key() -> None:
    seen: list[Sent] = []

    def handler(r: Sent) -> tuple[int, Any]:
        seen.append(r)
        return 201, {"id": 1}

    calls_with(handler).write(PLAIN, {"job_id": "j-1"}, key="effect-j-1", marker="cm-j-1", token=1)
    [r] = seen
    assert r.path == "/v1/sends"
    assert "Idempotency-Key" not in r.headers
    assert r.body is not None
    assert json.loads(r.body) == {"job_id": "j-1", "client_marker": "cm-j-1"}


def test_every_request_has_its_own_connection_closed_after_it() -> None:
    calls = calls_with(lambda r: (201, {"id": 1}))
    calls.write(IDEMPOTENT, {"job_id": "j"}, key="k", marker=None, token=1)
    conn: FakeConnection = calls.conn  # type: ignore[attr-defined]
    assert conn.closed
    assert conn.seen[0].headers["Connection"] == "close"


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
    result = calls_with(lambda r: (status, {})).write(
        IDEMPOTENT, {"job_id": "j"}, key="k", marker=None, token=1
    )
    assert result.kind == kind


@pytest.mark.parametrize(
    "refused",
    [ConnectionRefusedError("refused"), TimeoutError("slow connect"), OSError("no route")],
)
def test_a_connection_never_made_is_a_clean_failure(refused: OSError) -> None:
    calls = calls_with(lambda r: (201, {}), refuse=refused)
    result = calls.write(IDEMPOTENT, {"job_id": "j"}, key="k", marker=None, token=1)
    assert (result.kind, result.reason) == ("failed", f"not_sent:{type(refused).__name__}")


@pytest.mark.parametrize(
    "exc",
    [
        TimeoutError("slow answer"),  # never "failed": it may have landed
        ConnectionResetError("reset by peer"),
        BrokenPipeError("peer went away while sending"),
        RemoteDisconnected("server disconnected"),
        IncompleteRead("3 of 9 bytes"),
    ],
)
def test_anything_after_the_connection_is_up_is_unknown(exc: Exception) -> None:
    def handler(r: Sent) -> tuple[int, Any]:
        raise exc

    result = calls_with(handler).write(IDEMPOTENT, {"job_id": "j"}, key="k", marker=None, token=1)
    assert (result.kind, result.reason) == ("unknown", f"no_response:{type(exc).__name__}")


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
    seen: list[Sent] = []

    def handler(r: Sent) -> tuple[int, Any]:
        seen.append(r)
        return status, doc

    found = calls_with(handler).lookup(
        IDEMPOTENT, job_id="j-1", key="effect-j-1", marker="cm-j-1", token=2
    )
    assert found.outcome == outcome
    assert (seen[0].method, seen[0].path) == ("GET", "/v1/effects")
    assert seen[0].param("idempotency_key") == "effect-j-1"
    if outcome == "confirmed":
        assert found.ref == "5"


@pytest.mark.parametrize(
    ("matches", "outcome"),
    [([], "not_found"), ([{"id": 1}], "confirmed"), ([{"id": 1}, {"id": 2}], "conflict")],
)
def test_plain_lookup_counts_matches(matches: list[object], outcome: str) -> None:
    seen: list[Sent] = []

    def handler(r: Sent) -> tuple[int, Any]:
        seen.append(r)
        return 200, matches

    found = calls_with(handler).lookup(
        PLAIN, job_id="j-1", key="effect-j-1", marker="cm-j-1", token=2
    )
    assert found.outcome == outcome
    assert seen[0].param("client_marker") == "cm-j-1"


def test_lookup_that_cannot_connect_is_unavailable_not_not_found() -> None:
    calls = calls_with(lambda r: (200, []), refuse=ConnectionRefusedError("refused"))
    found = calls.lookup(PLAIN, job_id="j", key="k", marker="m", token=1)
    assert found.outcome == "unavailable"


def test_lookup_whose_answer_is_lost_is_unavailable() -> None:
    def handler(r: Sent) -> tuple[int, Any]:
        raise ConnectionResetError("reset")

    found = calls_with(handler).lookup(IDEMPOTENT, job_id="j", key="k", marker="m", token=1)
    assert found.outcome == "unavailable"


def test_a_bound_job_names_its_identity_and_a_refusal_is_unverified() -> None:
    seen: list[str | None] = []

    def handler(r: Sent) -> tuple[int, Any, dict[str, str]]:
        seen.append(r.headers.get("X-Crashpoint-Identity"))
        if r.method == "GET":
            return 401, {"detail": "expired"}, {}
        # Header names are case-blind on the wire: the worker must not care how it is cased.
        return 403, {}, {"x-crashpoint-identity": "acct-9"}

    calls = calls_with(handler)
    sent = calls.write(IDEMPOTENT, {"job_id": "j-1"}, key="k", marker=None, token=1, identity="a1")
    assert (sent.kind, sent.reason, sent.identity_now) == ("unverified", "http_403", "acct-9")
    found = calls.lookup(IDEMPOTENT, job_id="j-1", key="k", marker="m", token=1, identity="a1")
    assert (found.outcome, found.reason, found.identity_now) == ("unverified", "http_401", None)
    assert seen == ["a1", "a1"]
    calls.write(IDEMPOTENT, {"job_id": "j-1"}, key="k", marker=None, token=1)
    assert seen[-1] is None  # an unbound job names none
