"""The route table of a declared HTTP provider (``kind = "http"``): a good table is read
into the JSON the provider starts with, and each malformed one is a one-line error naming
the file and the key, which the CLI exits 2 on."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.contract.errors import ConfigError
from harness.targets.config import CommandConfig, config_from_data
from harness.targets.config_routes import describe

TARGET = {
    "name": "w",
    "command": ["python3", "worker.py"],
    "enqueue": ["python3", "enqueue.py", "{job_id}", "{payload_file}"],
}
BODY = '{"id": "{effect.id}", "external_ref": "{effect.key}"}'
ROUTES: dict[str, Any] = {
    "create": {
        "path": "/orders",
        "key": "body:$.meta.request_id",
        "job": "body:$.meta.job_id",
        "body": BODY,
    },
    "lookup": {"path": "/orders", "by": "query:external_ref", "body": BODY},
}


def parse(tmp_path: Path, routes: Any = None, **provider: Any) -> CommandConfig:
    entry = {"name": "orders", "kind": "http", **provider}
    if routes is not None:
        entry["routes"] = routes
    data = {"target": TARGET, "providers": [entry]}
    return config_from_data(data, path=tmp_path / "crashpoint.toml")


def changed(table: str, key: str, value: Any) -> dict[str, Any]:
    """ROUTES with ``routes.table.key`` set to ``value`` (removed when value is None)."""
    routes = copy.deepcopy(ROUTES)
    if value is None:
        routes[table].pop(key)
    else:
        routes[table][key] = value
    return routes


def test_a_table_is_read_into_json_and_its_kind(tmp_path: Path) -> None:
    (p,) = parse(tmp_path, ROUTES).providers
    assert (p.kind, p.persona, p.wire) == ("idempotent", "http", "http")
    options = p.start_options()
    assert options["persona"] == "http"
    create, lookup = options["routes"]["create"], options["routes"]["lookup"]
    assert create["key"] == {"in": "body", "path": ["meta", "request_id"]}
    assert (create["method"], create["status"]) == ("POST", 201)
    assert lookup["by"] == {"in": "query", "name": "external_ref"}
    assert (lookup["match"], lookup["status"]) == ("key", 200)
    assert describe(options["routes"]) == [
        "create: POST /orders -> 201, key body $.meta.request_id, job body $.meta.job_id",
        "lookup: GET /orders by query external_ref (the effect's key) -> 200, 404 when none",
    ]


def test_the_kind_follows_the_table(tmp_path: Path) -> None:
    keyless = changed("create", "key", "none")
    keyless["create"]["marker"] = "header:X-Ref"
    keyless["lookup"]["match"] = "marker"
    (p,) = parse(tmp_path, keyless).providers
    assert p.kind == "plain"
    no_lookup = {"create": {**ROUTES["create"], "key": "none"}}
    (q,) = parse(tmp_path, no_lookup).providers
    assert q.kind == "unqueryable"
    by_id = changed("lookup", "path", "/orders/{id}")
    by_id["lookup"]["by"] = "path:id"
    (r,) = parse(tmp_path, by_id).providers
    assert r.route_table is not None
    assert r.route_table["lookup"]["match"] == "id"


#: (routes, the key the error names, what it says): each a table a user could write.
MALFORMED: list[tuple[Any, str, str]] = [
    (
        changed("create", "key", "cookie"),
        "routes.create.key",
        'expected "header:NAME", "body:$.path" or "none", got "cookie"',
    ),
    (changed("create", "key", "body:meta.request_id"), "routes.create.key", "expected"),
    (changed("create", "key", None), "routes.create.key", "is missing"),
    (changed("create", "job", None), "routes.create.job", "is missing"),
    (changed("create", "job", "none"), "routes.create.job", 'got "none"'),
    (changed("create", "path", "orders"), "routes.create.path", 'got "orders"'),
    (changed("create", "path", None), "routes.create.path", "is missing"),
    (changed("create", "method", "FETCH"), "routes.create.method", 'got "FETCH"'),
    (changed("create", "status", 404), "routes.create.status", "from 200 to 299, got 404"),
    (changed("create", "status", "201"), "routes.create.status", 'got "201"'),
    (
        changed("create", "body", '{"amount": "{effect.amount}"}'),
        "routes.create.body",
        "{effect.amount}",
    ),
    (changed("create", "idem", "x"), "routes.create.idem", "is not a known key"),
    (changed("lookup", "by", "form:ref"), "routes.lookup.by", 'got "form:ref"'),
    (changed("lookup", "by", "path:id"), "routes.lookup.path", "does not fit"),
    (changed("lookup", "match", "amount"), "routes.lookup.match", 'got "amount"'),
    (changed("lookup", "method", "POST"), "routes.lookup.path", "is the create route too"),
    ({"lookup": ROUTES["lookup"]}, "routes.create", "is missing"),
    ({**ROUTES, "delete": {}}, "routes.delete", "is not a known key"),
    ("/orders", "routes", "must be a table"),
    (
        {"create": {**ROUTES["create"], "key": "none"}, "lookup": ROUTES["lookup"]},
        "routes.create.marker",
        "a lookup without a key needs one",
    ),
]


@pytest.mark.parametrize(("routes", "key", "says"), MALFORMED, ids=lambda v: None)
def test_a_malformed_table_is_one_line_naming_file_and_key(
    tmp_path: Path, routes: Any, key: str, says: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse(tmp_path, routes)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(f"{tmp_path / 'crashpoint.toml'}: providers[0].{key}"), text
    assert says in text, text


def test_at_least_ten_malformed_tables_are_tested() -> None:
    assert len(MALFORMED) >= 10


def test_routes_belong_to_kind_http_only(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"providers\[0\]\.routes is set on a provider of kind"):
        parse(tmp_path, ROUTES, kind="stripe")
    with pytest.raises(ConfigError, match=r"providers\[0\]\.routes is missing on a provider"):
        parse(tmp_path)


def test_the_cli_exits_2_with_the_line(tmp_path: Path) -> None:
    config = tmp_path / "crashpoint.toml"
    config.write_text(
        '[target]\nname = "w"\ncommand = ["python3", "w.py"]\n'
        'enqueue = ["python3", "e.py", "{job_id}", "{payload_file}"]\n\n'
        '[[providers]]\nname = "orders"\nkind = "http"\n\n'
        '[providers.routes.create]\npath = "/orders"\nkey = "cookie"\njob = "header:X-Job"\n'
    )
    done = CliRunner().invoke(main, ["check-config", "-c", str(config)])
    assert done.exit_code == 2, done.output
    assert (
        'crashpoint.toml: providers[0].routes.create.key expected "header:NAME", "body:$.path" '
        'or "none", got "cookie"'
    ) in " ".join(done.output.split())
