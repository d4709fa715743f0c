"""Identities at a provider: recorded per arrival, refused once expired or changed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_providers.app import ProviderApp, Request
from fake_providers.identity import HEADER, IdentityBoard
from tests.unit.test_providers_app import Sleeps, _app, post

ID = HEADER.lower()


@pytest.fixture(params=["idempotent", "plain", "unqueryable"])
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProviderApp]:
    yield from _app(tmp_path, request.param, Sleeps())


def _write(app: ProviderApp, job: str, **headers: str) -> int:
    body = {"job_id": job, "client_marker": f"cm-{job}"}
    key = f"effect-{job}" if app.kind == "idempotent" else None
    return post(app, body, key=key, **headers).status


def _control(app: ProviderApp, doc: object) -> tuple[int, object]:
    raw = json.dumps(doc).encode()
    reply = app.handle(
        Request("POST", "/_control/identities", {"content-type": "application/json"}, raw)
    )
    return reply.status, json.loads(reply.body)


def test_each_arrival_records_the_identity_it_was_made_under(app: ProviderApp) -> None:
    assert _write(app, "j-1", **{ID: "acct-1"}) == 201
    assert _write(app, "j-2") == 201
    by_job = {a["job_id"]: a["identity"] for a in app.store.arrivals()}
    assert by_job == {"j-1": "acct-1", "j-2": None}


def test_an_expired_session_is_refused_with_401_and_nothing_happens(app: ProviderApp) -> None:
    assert _control(app, {"identity": "acct-1", "state": "expired"})[0] == 200
    assert _write(app, "j-1", **{ID: "acct-1"}) == 401
    assert app.store.effects() == []
    (arrival,) = app.store.arrivals()
    assert (arrival["status"], arrival["identity"], arrival["committed"]) == (401, "acct-1", False)
    # Another identity, and a request naming none, are served as before.
    assert _write(app, "j-2", **{ID: "acct-2"}) == 201
    assert _write(app, "j-3") == 201


def test_a_changed_profile_is_refused_with_403_naming_who_it_holds_now(app: ProviderApp) -> None:
    _control(app, {"identity": "acct-1", "state": "changed", "now_acts_as": "acct-9"})
    body = {"job_id": "j-1", "client_marker": "cm-j-1"}
    key = "effect-j-1" if app.kind == "idempotent" else None
    reply = post(app, body, key=key, **{ID: "acct-1"})
    assert reply.status == 403
    assert (HEADER, "acct-9") in reply.headers
    assert "now acts as 'acct-9'" in json.loads(reply.body)["detail"]
    assert app.store.effects() == []


def test_lookups_under_a_refused_identity_are_refused_too(app: ProviderApp) -> None:
    _control(app, {"identity": "acct-1", "state": "expired"})
    param = "idempotency_key" if app.kind == "idempotent" else "client_marker"
    reply = app.handle(Request("GET", f"{app.write_path}?{param}=x&job_id=j-1", {ID: "acct-1"}))
    assert reply.status == 401  # before a 501 or a 404: the identity is checked first
    (arrival,) = app.store.arrivals()
    assert (arrival["kind"], arrival["identity"]) == ("lookup", "acct-1")


def test_valid_again_serves_again_and_reset_forgets(app: ProviderApp) -> None:
    _control(app, {"identity": "acct-1", "state": "expired"})
    status, doc = _control(app, {"identity": "acct-1", "state": "valid"})
    assert (status, doc) == (200, {})
    assert _write(app, "j-1", **{ID: "acct-1"}) == 201
    _control(app, {"identity": "acct-2", "state": "expired"})
    app.handle(Request("POST", "/_control/reset"))
    assert _write(app, "j-2", **{ID: "acct-2"}) == 201


@pytest.mark.parametrize(
    "doc",
    [
        {"identity": "acct-1", "state": "gone"},
        {"identity": "", "state": "expired"},
        {"identity": 7, "state": "expired"},
        {"identity": "acct-1", "state": "changed"},
        {"identity": "acct-1", "state": "changed", "now_acts_as": "acct-1"},
        {"identity": "acct-1", "state": "expired", "now_acts_as": 3},
        {"identity": "acct-1", "state": "expired", "typo": 1},
    ],
)
def test_bad_identity_states_are_422(app: ProviderApp, doc: dict[str, object]) -> None:
    assert _control(app, doc)[0] == 422


def test_the_board_refuses_nothing_it_was_not_told() -> None:
    board = IdentityBoard()
    board.check(None)
    board.check("acct-1")
    board.set("acct-1", "expired")
    assert board.snapshot() == {"acct-1": {"state": "expired", "now_acts_as": None}}
