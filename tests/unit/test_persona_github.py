"""The github persona without sockets: GitHub's REST wire over the plain kind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from fake_providers.app import ProviderApp, Reply, Request
from fake_providers.faults import FaultBoard
from fake_providers.models import Fault
from fake_providers.personas.github_wire import job_and_marker
from fake_providers.store import Store

AUTH = {"authorization": "token ghp_test", "content-type": "application/json", "host": "gh"}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[ProviderApp]:
    store = Store(tmp_path / "g.db", provider="github")
    board = FaultBoard(hold_max_s=30.0)
    yield ProviderApp(kind="github", name="github", store=store, board=board, sleep=lambda s: None)
    board.close()
    store.close()


def text(job: str = "j-0001", marker: str = "m-1") -> str:
    return f"Refund failed.\n<!-- crashpoint-job: {job} crashpoint-marker: {marker} -->"


def post(app: ProviderApp, path: str, doc: dict[str, Any], headers: dict[str, str] = AUTH) -> Reply:
    return app.handle(Request("POST", path, headers, json.dumps(doc).encode()))


def get(app: ProviderApp, target: str) -> Reply:
    return app.handle(Request("GET", target, {"host": "gh"}))


def search(app: ProviderApp, q: str) -> Reply:
    return get(app, f"/search/issues?q={quote(q)}")


def body(r: Reply) -> Any:
    return json.loads(r.body)


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("<!-- crashpoint-job: j-0001 crashpoint-marker: m-9 -->", ("j-0001", "m-9")),
        ("job j-0042\ncrashpoint-marker: abc.1", ("j-0042", "abc.1")),
        ("nothing here", (None, None)),
    ],
)
def test_the_body_convention(written: str, expected: tuple[str | None, str | None]) -> None:
    assert job_and_marker(written) == expected


def test_every_issue_is_one_more_effect_numbered_by_it(app: ProviderApp) -> None:
    doc = {"title": "Refund", "body": text(), "labels": ["bug"]}
    first = post(app, "/repos/o/r/issues", doc)
    second = post(app, "/repos/o/r/issues", doc)
    assert first.status == second.status == 201
    one, two = body(first), body(second)
    assert (one["number"], two["number"]) == (1, 2)
    assert one["state"] == "open"
    assert one["labels"][0]["name"] == "bug"
    assert one["url"] == "http://gh/repos/o/r/issues/1"
    assert ("Location", one["url"]) in first.headers
    effects = app.store.effects()
    assert [(e["job_id"], e["client_marker"]) for e in effects] == [("j-0001", "m-1")] * 2


def test_the_marker_is_not_fingerprinted(app: ProviderApp) -> None:
    post(app, "/repos/o/r/issues", {"title": "t", "body": text(marker="m-a")})
    post(app, "/repos/o/r/issues", {"title": "t", "body": text(marker="m-b")})
    assert len({e["fingerprint"] for e in app.store.effects()}) == 1


def test_a_comment_needs_its_issue(app: ProviderApp) -> None:
    r = post(app, "/repos/o/r/issues/7/comments", {"body": text()})
    assert r.status == 404
    assert body(r)["message"] == "Not Found"
    post(app, "/repos/o/r/issues", {"title": "t", "body": text()})
    r = post(app, "/repos/o/r/issues/1/comments", {"body": text("j-0002", "m-2")})
    assert r.status == 201
    assert body(r)["issue_url"] == "http://gh/repos/o/r/issues/1"
    assert app.store.effects()[-1]["job_id"] == "j-0002"


def test_search_finds_the_marker_and_is_the_markers_jobs_lookup(app: ProviderApp) -> None:
    post(app, "/repos/o/r/issues", {"title": "a", "body": text("j-0001", "m-1")})
    post(app, "/repos/o/other/issues", {"title": "b", "body": text("j-0002", "m-2")})
    post(app, "/repos/o/r/issues", {"title": "c", "body": text("j-0003", "m-3")})
    doc = body(search(app, "m-1 in:body repo:o/r"))
    assert doc["total_count"] == 1
    assert doc["incomplete_results"] is False
    assert doc["items"][0]["number"] == 1
    assert doc["items"][0]["score"] == 1.0
    assert body(search(app, "m-2 repo:o/r"))["total_count"] == 0
    lookups = [a for a in app.store.arrivals() if a["kind"] == "lookup"]
    assert [(a["job_id"], a["client_marker"], a["status"]) for a in lookups] == [
        ("j-0001", "m-1", 200),
        ("j-0002", "m-2", 200),
    ]


def test_search_sees_comments_unless_told_in_body(app: ProviderApp) -> None:
    post(app, "/repos/o/r/issues", {"title": "a", "body": text("j-0001", "m-1")})
    post(app, "/repos/o/r/issues/1/comments", {"body": text("j-0002", "m-2")})
    assert body(search(app, "m-2 repo:o/r"))["total_count"] == 1
    assert body(search(app, "m-2 in:body repo:o/r"))["total_count"] == 0


def test_a_search_for_a_marker_whose_write_never_committed_counts_for_its_job(
    app: ProviderApp,
) -> None:
    app.board.arm(Fault("fail_before_commit", status=502))
    r = post(app, "/repos/o/r/issues", {"title": "a", "body": text()})
    assert r.status == 502
    assert body(r)["message"] == "Server Error"
    assert body(search(app, "m-1 in:body repo:o/r"))["total_count"] == 0
    lookup = app.store.arrivals()[-1]
    assert (lookup["job_id"], lookup["status"]) == ("j-0001", 200)


def test_get_issue_is_a_lookup_for_its_job(app: ProviderApp) -> None:
    post(app, "/repos/o/r/issues", {"title": "a", "body": text()})
    r = get(app, "/repos/o/r/issues/1")
    assert r.status == 200
    assert body(r)["title"] == "a"
    assert get(app, "/repos/o/r/issues/9").status == 404
    lookups = [a for a in app.store.arrivals() if a["kind"] == "lookup"]
    assert [(a["job_id"], a["status"]) for a in lookups] == [("j-0001", 200), (None, 404)]


@pytest.mark.parametrize(
    ("doc", "headers", "status", "message"),
    [
        ({"title": "a", "body": text()}, {"content-type": "application/json"}, 401, None),
        ({"body": text()}, AUTH, 422, "Validation Failed"),
        ({"title": "a", "body": "no marker"}, AUTH, 422, "Validation Failed"),
    ],
)
def test_errors_in_githubs_envelope(
    app: ProviderApp, doc: dict[str, Any], headers: dict[str, str], status: int, message: str | None
) -> None:
    r = post(app, "/repos/o/r/issues", doc, headers)
    assert r.status == status
    assert set(body(r)) >= {"message", "documentation_url"}
    if message:
        assert body(r)["message"] == message
    assert app.store.arrivals()[0]["status"] == status
    assert app.store.effects() == []


def test_malformed_json_and_identities(app: ProviderApp) -> None:
    r = app.handle(Request("POST", "/repos/o/r/issues", AUTH, b"{nope"))
    assert r.status == 400
    assert body(r)["message"] == "Problems parsing JSON"
    app.identities.set("acct-1", "expired")
    h = {**AUTH, "x-crashpoint-identity": "acct-1"}
    r = post(app, "/repos/o/r/issues", {"title": "a", "body": text()}, h)
    assert r.status == 401
    assert body(r)["message"] == "Bad credentials"
    app.identities.set("acct-1", "changed", now_acts_as="acct-9")
    r = post(app, "/repos/o/r/issues", {"title": "a", "body": text()}, h)
    assert r.status == 403
    assert not any(k.lower() == "retry-after" for k, _ in r.headers)


def test_rate_limit_and_failed_lookup(app: ProviderApp) -> None:
    app.board.arm(Fault("fail_before_commit", status=429))
    r = post(app, "/repos/o/r/issues", {"title": "a", "body": text()})
    assert r.status == 429
    assert ("Retry-After", "1") in r.headers
    app.board.arm(Fault("fail_lookup"))
    r = search(app, "m-1")
    assert r.status == 503
    assert body(r)["message"] == "Service Unavailable"
    assert get(app, "/repos/o/r/pulls").status == 404
