"""The declared persona (``kind = "http"``) without sockets: a create answers its template
over the new effect, a replay under the same key the same effect, a lookup finds it by
query or path parameter, a lookup that finds nothing is a 404, and faults act on its
routes as on every provider's."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from fake_providers.app import ProviderApp, Reply, Request
from fake_providers.cli import serve
from fake_providers.faults import FaultBoard
from fake_providers.models import Fault
from fake_providers.personas.declared import declared_kind, render
from fake_providers.store import Store

BODY = '{"id": "{effect.id}", "external_ref": "{effect.key}", "job": "{effect.job}"}'
ROUTES: dict[str, Any] = {
    "create": {
        "method": "POST",
        "path": "/orders",
        "key": {"in": "body", "path": ["meta", "request_id"]},
        "job": {"in": "body", "path": ["meta", "job_id"]},
        "marker": None,
        "status": 201,
        "body": BODY,
    },
    "lookup": {
        "method": "GET",
        "path": "/orders",
        "by": {"in": "query", "name": "external_ref"},
        "match": "key",
        "status": 200,
        "body": BODY,
        "not_found": '{"error": "no such order"}',
    },
}


@contextlib.contextmanager
def make(tmp_path: Path, routes: dict[str, Any]) -> Iterator[ProviderApp]:
    store = Store(tmp_path / "orders.db", provider="orders")
    board = FaultBoard(hold_max_s=30.0)
    yield ProviderApp(kind="http", name="orders", store=store, board=board, routes=routes)
    board.close()
    store.close()


@pytest.fixture
def app(tmp_path: Path) -> Iterator[ProviderApp]:
    with make(tmp_path, ROUTES) as made:
        yield made


def create(app: ProviderApp, key: str = "rk-1", job: str = "j-1", amount: int = 5) -> Reply:
    doc = {"amount": amount, "meta": {"request_id": key, "job_id": job}}
    headers = {"content-type": "application/json"}
    return app.handle(Request("POST", "/orders", headers, json.dumps(doc).encode()))


def get(app: ProviderApp, target: str) -> Reply:
    return app.handle(Request("GET", target, {}, b""))


def test_a_create_answers_its_template_over_the_new_effect(app: ProviderApp) -> None:
    reply = create(app)
    assert reply.status == 201
    doc = json.loads(reply.body)
    (effect,) = app.store.effects()
    assert doc == {"id": effect["external_id"], "external_ref": "rk-1", "job": "j-1"}
    assert (effect["job_id"], effect["idempotency_key"]) == ("j-1", "rk-1")
    assert app.kind == "idempotent"


def test_a_replay_under_the_same_key_is_the_same_effect(app: ProviderApp) -> None:
    first = create(app)
    again = create(app)
    assert (again.status, again.body) == (first.status, first.body)
    assert len(app.store.effects()) == 1
    # The key names the request; the rest of the body is what "the same" means.
    assert create(app, amount=6).status == 422
    assert len(app.store.effects()) == 1
    create(app, key="rk-2")
    assert len(app.store.effects()) == 2


def test_a_lookup_finds_the_effect_or_answers_404(app: ProviderApp) -> None:
    made = json.loads(create(app).body)
    found = get(app, "/orders?external_ref=rk-1")
    assert (found.status, json.loads(found.body)) == (200, made)
    missing = get(app, "/orders?external_ref=rk-9")
    assert (missing.status, json.loads(missing.body)) == (404, {"error": "no such order"})
    lookups = [a for a in app.store.arrivals() if a["kind"] == "lookup"]
    # The found one is the job's lookup (a reconcile); both are recorded with their status.
    assert [(a["job_id"], a["status"]) for a in lookups] == [("j-1", 200), (None, 404)]


def test_a_lookup_by_path_parameter_matches_the_effect_id(tmp_path: Path) -> None:
    routes = copy.deepcopy(ROUTES)
    routes["lookup"] |= {"path": "/orders/{id}", "by": {"in": "path", "name": "id"}, "match": "id"}
    with make(tmp_path, routes) as app:
        made = json.loads(create(app).body)
        assert json.loads(get(app, f"/orders/{made['id']}").body) == made
        assert get(app, "/orders/rec_nope").status == 404
        assert get(app, "/tickets").status == 404


def test_a_keyless_table_is_plain_and_found_by_its_marker(tmp_path: Path) -> None:
    routes = copy.deepcopy(ROUTES)
    routes["create"] |= {"key": None, "marker": {"in": "header", "name": "x-ticket-ref"}}
    routes["lookup"] |= {"by": {"in": "query", "name": "ref"}, "match": "marker"}
    with make(tmp_path, routes) as app:
        assert app.kind == "plain"
        headers = {"content-type": "application/json", "x-ticket-ref": "t-1"}
        doc = json.dumps({"meta": {"job_id": "j-1"}, "title": "x"}).encode()
        first = app.handle(Request("POST", "/orders", headers, doc))
        again = app.handle(Request("POST", "/orders", headers, doc))
        # No key: a second create is a second effect, as at the real service.
        assert json.loads(first.body)["id"] != json.loads(again.body)["id"]
        assert [e["client_marker"] for e in app.store.effects()] == ["t-1", "t-1"]
        assert json.loads(get(app, "/orders?ref=t-1").body) == json.loads(first.body)
        assert get(app, "/orders?ref=t-2").status == 404


def test_a_create_without_its_key_or_job_is_refused(app: ProviderApp) -> None:
    headers = {"content-type": "application/json"}
    no_key = {"meta": {"job_id": "j-1"}}
    reply = app.handle(Request("POST", "/orders", headers, json.dumps(no_key).encode()))
    assert reply.status == 400
    assert json.loads(reply.body)["error"] == "missing_key"
    no_job = {"meta": {"request_id": "rk"}}
    reply = app.handle(Request("POST", "/orders", headers, json.dumps(no_job).encode()))
    assert reply.status == 400
    assert "job's id" in json.loads(reply.body)["message"]
    assert app.store.effects() == []


def test_faults_act_on_the_declared_routes(app: ProviderApp) -> None:
    app.board.arm(Fault("fail_before_commit", job="j-1", status=503))
    failed = create(app)
    assert failed.status == 503
    assert app.store.effects() == []
    assert create(app).status == 201
    app.board.arm(Fault("fail_lookup", key="rk-1", status=502))
    assert get(app, "/orders?external_ref=rk-1").status == 502
    app.board.arm(Fault("drop_after_commit", job="j-2"))
    assert create(app, key="rk-2", job="j-2").drop
    # Dropped after the commit: the effect is there, and the lookup finds it.
    assert get(app, "/orders?external_ref=rk-2").status == 200


def test_templates_escape_values_and_fall_back_to_text() -> None:
    body, ctype = render('{"ref": "{effect.key}"}', {"key": 'a"b'})
    assert json.loads(body) == {"ref": 'a"b'}
    assert ctype == "application/json"
    body, ctype = render("created {effect.id}", {"id": "r1"})
    assert (body, ctype.split(";")[0]) == (b"created r1", "text/plain")


def test_the_kind_follows_the_table() -> None:
    keyless = {**ROUTES, "create": {**ROUTES["create"], "key": None}}
    assert declared_kind(ROUTES) == "idempotent"
    assert declared_kind(keyless) == "plain"
    assert declared_kind({**keyless, "lookup": None}) == "unqueryable"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--kind", "http"], "--kind http needs --routes"),
        (["--kind", "plain", "--routes", json.dumps(ROUTES)], "--routes goes with --kind http"),
        (["--kind", "http", "--routes", "{"], "not JSON"),
        (["--kind", "http", "--routes", '{"create": {}}'], "not a route table"),
    ],
)
def test_provider_serve_refuses_a_kind_http_without_its_table(
    tmp_path: Path, args: list[str], says: str
) -> None:
    done = CliRunner().invoke(serve, [*args, "--state", str(tmp_path / "s.db")])
    assert done.exit_code == 2, done.output
    assert says in " ".join(done.output.split())
