"""The slack persona without sockets: Slack's wire over the plain kind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from fake_providers.app import ProviderApp, Reply, Request
from fake_providers.faults import FaultBoard
from fake_providers.models import Fault
from fake_providers.store import Store

AUTH = {"authorization": "Bearer xoxb-test"}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[ProviderApp]:
    store = Store(tmp_path / "s.db", provider="slack")
    board = FaultBoard(hold_max_s=30.0)
    yield ProviderApp(kind="slack", name="slack", store=store, board=board, sleep=lambda s: None)
    board.close()
    store.close()


def meta(job: str = "j-0001", marker: str = "m-1") -> dict[str, Any]:
    return {
        "event_type": "crashpoint_job",
        "event_payload": {"job_id": job, "client_marker": marker},
    }


def post_json(app: ProviderApp, args: dict[str, Any], headers: dict[str, str] = AUTH) -> Reply:
    h = {**headers, "content-type": "application/json;charset=utf-8"}
    return app.handle(Request("POST", "/api/chat.postMessage", h, json.dumps(args).encode()))


def post_form(app: ProviderApp, args: dict[str, str]) -> Reply:
    h = {**AUTH, "content-type": "application/x-www-form-urlencoded"}
    return app.handle(Request("POST", "/api/chat.postMessage", h, urlencode(args).encode()))


def history(app: ProviderApp, query: str = "channel=C1") -> Reply:
    return app.handle(Request("POST", f"/api/conversations.history?{query}", AUTH))


def body(r: Reply) -> Any:
    return json.loads(r.body)


def test_every_post_is_one_more_message_with_a_ts_derived_from_the_effect(
    app: ProviderApp,
) -> None:
    args = {"channel": "C1", "text": "hi", "metadata": meta()}
    first, second = body(post_json(app, args)), body(post_json(app, args))
    assert first["ok"]
    assert second["ok"]
    assert first["channel"] == "C1"
    assert first["ts"].endswith(".000001")
    assert second["ts"].endswith(".000002")
    assert first["message"]["metadata"] == meta()
    effects = app.store.effects()
    assert [(e["job_id"], e["client_marker"]) for e in effects] == [("j-0001", "m-1")] * 2
    # No idempotency: the same post twice has one fingerprint, and two effects.
    assert effects[0]["fingerprint"] == effects[1]["fingerprint"]
    writes = [a for a in app.store.arrivals() if a["kind"] == "write"]
    assert {a["path"] for a in writes} == {"/api/chat.postMessage?channel=C1"}


def test_a_form_post_reads_metadata_from_its_json_text(app: ProviderApp) -> None:
    r = post_form(app, {"channel": "C1", "text": "hi", "metadata": json.dumps(meta("j-0002"))})
    assert body(r)["ok"] is True
    assert app.store.effects()[0]["job_id"] == "j-0002"


def test_the_marker_is_not_part_of_the_fingerprint(app: ProviderApp) -> None:
    post_json(app, {"channel": "C1", "text": "hi", "metadata": meta(marker="a")})
    post_json(app, {"channel": "C1", "text": "hi", "metadata": meta(marker="b")})
    prints = {e["fingerprint"] for e in app.store.effects()}
    assert len(prints) == 1


def test_history_is_newest_first_with_metadata_and_one_lookup_per_job(
    app: ProviderApp,
) -> None:
    post_json(app, {"channel": "C1", "text": "a", "metadata": meta("j-0001", "m-1")})
    post_json(app, {"channel": "C1", "text": "b", "metadata": meta("j-0002", "m-2")})
    post_json(app, {"channel": "C2", "text": "c", "metadata": meta("j-0003", "m-3")})
    doc = body(history(app))
    assert doc["ok"] is True
    assert doc["has_more"] is False
    assert [m["text"] for m in doc["messages"]] == ["b", "a"]
    assert doc["messages"][1]["metadata"]["event_payload"]["client_marker"] == "m-1"
    lookups = [a for a in app.store.arrivals() if a["kind"] == "lookup"]
    assert [(a["job_id"], a["client_marker"], a["status"]) for a in lookups] == [
        ("j-0001", "m-1", 200),
        ("j-0002", "m-2", 200),
    ]


def test_history_pages_with_a_cursor_and_filters_by_ts(app: ProviderApp) -> None:
    for text in "abc":
        post_json(app, {"channel": "C1", "text": text, "metadata": meta()})
    first = body(history(app, "channel=C1&limit=2"))
    assert [m["text"] for m in first["messages"]] == ["c", "b"]
    assert first["has_more"]
    cursor = first["response_metadata"]["next_cursor"]
    rest = body(history(app, urlencode({"channel": "C1", "cursor": cursor})))
    assert [m["text"] for m in rest["messages"]] == ["a"]
    oldest = first["messages"][1]["ts"]
    newer = body(history(app, urlencode({"channel": "C1", "oldest": oldest})))
    assert [m["text"] for m in newer["messages"]] == ["c"]


def test_a_read_of_a_channel_nobody_posted_to_is_one_unattributed_lookup(
    app: ProviderApp,
) -> None:
    doc = body(history(app, "channel=C9"))
    assert doc["messages"] == []
    (lookup,) = app.store.arrivals()
    assert lookup["kind"] == "lookup"
    assert lookup["job_id"] is None


def test_a_lookup_counts_for_a_job_whose_post_never_committed(app: ProviderApp) -> None:
    app.board.arm(Fault("fail_before_commit", job="j-0001"))
    r = post_json(app, {"channel": "C1", "text": "a", "metadata": meta()})
    assert r.status == 503
    assert body(r) == {"ok": False, "error": "service_unavailable"}
    assert body(history(app))["messages"] == []
    lookup = app.store.arrivals()[-1]
    assert (lookup["kind"], lookup["job_id"], lookup["status"]) == ("lookup", "j-0001", 200)


@pytest.mark.parametrize(
    ("args", "headers", "error", "logged"),
    [
        ({"channel": "C1", "text": "a", "metadata": meta()}, {}, "not_authed", 401),
        ({"text": "a", "metadata": meta()}, AUTH, "channel_not_found", 404),
        ({"channel": "C1", "metadata": meta()}, AUTH, "no_text", 400),
        ({"channel": "C1", "text": "a"}, AUTH, "invalid_metadata_schema", 422),
        (
            {"channel": "C1", "text": "a", "metadata": {"event_type": "x", "event_payload": {}}},
            AUTH,
            "invalid_metadata_schema",
            422,
        ),
    ],
)
def test_business_errors_are_http_200_ok_false_but_recorded_as_errors(
    app: ProviderApp, args: dict[str, Any], headers: dict[str, str], error: str, logged: int
) -> None:
    r = post_json(app, args, headers)
    assert r.status == 200
    assert body(r)["ok"] is False
    assert body(r)["error"] == error
    (arrival,) = app.store.arrivals()
    # The oracle must see a refused write as settled (status >= 400), not as a 200.
    assert arrival["status"] == logged
    assert not arrival["committed"]
    assert app.store.effects() == []


def test_an_injected_429_is_ratelimited_with_retry_after(app: ProviderApp) -> None:
    app.board.arm(Fault("fail_before_commit", status=429))
    r = post_json(app, {"channel": "C1", "text": "a", "metadata": meta()})
    assert r.status == 429
    assert body(r) == {"ok": False, "error": "ratelimited"}
    assert ("Retry-After", "1") in r.headers
    assert app.store.arrivals()[0]["status"] == 429
    assert app.store.effects() == []


def test_identities_refuse_in_slack_words(app: ProviderApp) -> None:
    app.identities.set("acct-1", "expired")
    h = {**AUTH, "x-crashpoint-identity": "acct-1"}
    r = post_json(app, {"channel": "C1", "text": "a", "metadata": meta()}, h)
    assert r.status == 200
    assert body(r)["error"] == "token_expired"
    r = app.handle(Request("GET", "/api/conversations.history?channel=C1", h))
    assert body(r)["error"] == "token_expired"
    assert [a["status"] for a in app.store.arrivals()] == [401, 401]


def test_a_failed_lookup_is_a_5xx(app: ProviderApp) -> None:
    post_json(app, {"channel": "C1", "text": "a", "metadata": meta()})
    app.board.arm(Fault("fail_lookup", status=500))
    r = history(app)
    assert r.status == 500
    assert body(r)["error"] == "internal_error"
    assert app.store.arrivals()[-1]["fault"] == "fail_lookup"


def test_auth_test_and_unknown_methods(app: ProviderApp) -> None:
    r = app.handle(Request("POST", "/api/auth.test", AUTH))
    assert body(r)["ok"] is True
    assert body(r)["user_id"] == "U0CRASHPT"
    assert body(app.handle(Request("POST", "/api/auth.test")))["error"] == "not_authed"
    r = app.handle(Request("POST", "/api/users.list", AUTH))
    assert r.status == 200
    assert body(r)["error"] == "unknown_method"
    assert app.store.arrivals() == []
