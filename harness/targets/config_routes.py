"""``[providers.routes]``: the route table of a declared HTTP provider (``kind = "http"``).

An in-house service is declared, not written: which method and path create an effect,
where its idempotency key and the job's id ride, which route looks an effect up and by
what, and what each answer says (a template over the stored effect). The table is read
here into plain JSON, which the provider process is started with
(``fake_providers/personas/declared.py`` serves it); every mistake is one line naming the
key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.targets.config_reader import TableReader, is_int, shown

ROUTES_KEYS = ("create", "lookup")
CREATE_KEYS = ("method", "path", "key", "job", "marker", "status", "body")
LOOKUP_KEYS = ("method", "path", "by", "match", "status", "body", "not_found")
#: What a template may say of the stored effect: ``{effect.id}``, ...
EFFECT_FIELDS = ("id", "key", "job", "marker")
MATCHES = ("key", "marker", "id")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
DEFAULT_BODY = '{"id": "{effect.id}"}'
DEFAULT_NOT_FOUND = '{"error": "not_found"}'
#: ``$.meta.request_id``: a dotted path of object fields from the body's root.
_JSON_PATH = re.compile(r"^\$(\.[A-Za-z_][A-Za-z0-9_-]*)+$")
_HEADER = re.compile(r"^[A-Za-z0-9-]+$")
_PARAM = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLACEHOLDER = re.compile(r"\{effect\.([^{}]*)\}")
_LOCATIONS = '"header:NAME", "body:$.path"'


class RouteSchema(TableReader):
    """The ``routes`` part of a ``[[providers]]`` table."""

    def routes(self, entry: Mapping[str, Any], where: str, kind: str) -> dict[str, Any] | None:
        """The route table of a provider, as JSON; None for a provider of another kind."""
        key = f"{where}routes"
        if kind != "http":
            if "routes" in entry:
                raise self.fail(
                    key,
                    f"is set on a provider of kind {shown(kind)}",
                    'routes declare an in-house API: use kind = "http", or drop routes',
                )
            return None
        table = entry.get("routes")
        if table is None:
            raise self.fail(
                key,
                'is missing on a provider of kind "http"',
                "add [providers.routes.create] with path, key and job (docs/providers.md)",
            )
        if not isinstance(table, dict):
            raise self.wrong(where, "routes", table, "a table", example="{ create = {...} }")
        self.known(table, f"{key}.", ROUTES_KEYS, label="routes")
        if "create" not in table:
            raise self.fail(
                f"{key}.create",
                "is missing",
                'add [providers.routes.create] with method, path = "/orders", key and job',
            )
        create = self._create(self._table(table, f"{key}.", "create"), f"{key}.create.")
        out: dict[str, Any] = {"create": create, "lookup": None}
        if "lookup" in table and create["key"] is None and create["marker"] is None:
            raise self.fail(
                f"{key}.create.marker",
                "is missing, and a lookup without a key needs one to find the effect by",
                'add marker = "body:$.ref" (the name the worker gives each effect)',
            )
        if "lookup" in table:
            lookup_at = f"{key}.lookup."
            out["lookup"] = self._lookup(self._table(table, f"{key}.", "lookup"), lookup_at, create)
        return out

    def _table(self, table: Mapping[str, Any], where: str, key: str) -> Mapping[str, Any]:
        value = table[key]
        if not isinstance(value, dict):
            raise self.wrong(where, key, value, "a table", example='{ path = "/orders" }')
        return value

    def _create(self, table: Mapping[str, Any], where: str) -> dict[str, Any]:
        self.known(table, where, CREATE_KEYS, label="routes.create")
        if "key" not in table:
            raise self.fail(
                f"{where}key",
                "is missing",
                f'say where the idempotency key rides: {_LOCATIONS} or "none"',
            )
        key = self._location(table, where, "key", none_ok=True)
        job = self._location(table, where, "job", none_ok=False)
        if job is None:
            raise self.fail(
                f"{where}job",
                "is missing",
                f"say where the job's id rides: {_LOCATIONS}",
            )
        return {
            "method": self._method(table, where, "POST"),
            "path": self._path(table, where, param=False),
            "key": key,
            "job": job,
            "marker": self._location(table, where, "marker", none_ok=False),
            "status": self._status(table, where, 201, (200, 299)),
            "body": self._template(table, where, "body", DEFAULT_BODY),
        }

    def _lookup(
        self, table: Mapping[str, Any], where: str, create: Mapping[str, Any]
    ) -> dict[str, Any]:
        self.known(table, where, LOOKUP_KEYS, label="routes.lookup")
        method = self._method(table, where, "GET")
        path = self._path(table, where, param=True)
        by = self.string(table, where, "by", example='"query:external_ref"')
        source, _, name = by.partition(":")
        if source not in ("query", "path") or not _PARAM.fullmatch(name):
            raise self.fail(
                f"{where}by",
                f'expected "query:NAME" or "path:NAME", got {shown(by)}',
                'write by = "query:external_ref", or by = "path:id" with path = "/orders/{id}"',
            )
        params = re.findall(r"\{([^{}]*)\}", path)
        if (source == "path") != (params == [name]):
            raise self.fail(
                f"{where}path",
                f"{shown(path)} does not fit by = {shown(by)}",
                f"a path parameter is named in the path once ({{{name}}}); a query is not",
            )
        if (method, path) == (create["method"], create["path"]):
            raise self.fail(
                f"{where}path",
                f"{method} {path} is the create route too",
                "give the lookup its own method or path",
            )
        default = "id" if source == "path" else ("key" if create["key"] else "marker")
        match = table.get("match", default)
        if match not in MATCHES:
            raise self.fail(
                f"{where}match",
                f"expected one of {', '.join(shown(m) for m in MATCHES)}, got {shown(match)}",
                "match says what the looked-up value is compared with",
            )
        if match in ("key", "marker") and create[match] is None:
            raise self.fail(
                f"{where}match",
                f"is {shown(match)}, but routes.create declares no {match}",
                f"declare routes.create.{match}, or match the effect's id",
            )
        return {
            "method": method,
            "path": path,
            "by": {"in": source, "name": name},
            "match": match,
            "status": self._status(table, where, 200, (200, 299)),
            "body": self._template(table, where, "body", DEFAULT_BODY),
            "not_found": self._template(table, where, "not_found", DEFAULT_NOT_FOUND),
        }

    def _location(
        self, table: Mapping[str, Any], where: str, key: str, *, none_ok: bool
    ) -> dict[str, Any] | None:
        """``header:NAME``, ``body:$.a.b`` (or ``none`` where allowed) as JSON."""
        if key not in table:
            return None
        value = table[key]
        spec = value if isinstance(value, str) else ""
        source, _, name = spec.partition(":")
        if none_ok and spec == "none":
            return None
        if source == "header" and _HEADER.fullmatch(name):
            return {"in": "header", "name": name.lower()}
        if source == "body" and _JSON_PATH.fullmatch(name):
            return {"in": "body", "path": name.split(".")[1:]}
        expected = _LOCATIONS + (' or "none"' if none_ok else "")
        raise self.fail(
            f"{where}{key}",
            f"expected {expected}, got {shown(value)}",
            "a header by name (header:Idempotency-Key), a body field by path ($.meta.id)",
        )

    def _method(self, table: Mapping[str, Any], where: str, default: str) -> str:
        method = table.get("method", default)
        if method not in METHODS:
            raise self.fail(
                f"{where}method",
                f"expected one of {', '.join(METHODS)}, got {shown(method)}",
                f'write method = "{default}"',
            )
        return str(method)

    def _path(self, table: Mapping[str, Any], where: str, *, param: bool) -> str:
        path = self.string(table, where, "path", example='"/orders"')
        ok = path.startswith("/") and "?" not in path and "//" not in path
        if not ok or (not param and "{" in path):
            raise self.fail(
                f"{where}path",
                f'expected a path like "/orders", got {shown(path)}',
                "start it with /, with no query"
                + ("" if param else " and no {parameter} (only a lookup has one)"),
            )
        return path

    def _status(
        self, table: Mapping[str, Any], where: str, default: int, bounds: tuple[int, int]
    ) -> int:
        status = table.get("status", default)
        if not is_int(status) or not bounds[0] <= status <= bounds[1]:
            raise self.fail(
                f"{where}status",
                f"expected a status from {bounds[0]} to {bounds[1]}, got {shown(status)}",
                f"write status = {default}",
            )
        return int(status)

    def _template(self, table: Mapping[str, Any], where: str, key: str, default: str) -> str:
        body = table.get(key, default)
        if not isinstance(body, str):
            raise self.wrong(where, key, body, "a string", example=f"'{default}'")
        for field in _PLACEHOLDER.findall(body):
            if field not in EFFECT_FIELDS:
                raise self.fail(
                    f"{where}{key}",
                    f"names {{effect.{field}}}, which the stored effect does not have",
                    f"use {', '.join('{effect.' + f + '}' for f in EFFECT_FIELDS)}",
                )
        return body


def describe(routes: Mapping[str, Any]) -> list[str]:
    """The routes as ``check-config`` shows them: one line each (none without a table)."""
    if not routes:
        return []
    create = routes["create"]
    lines = [
        f"create: {create['method']} {create['path']} -> {create['status']}, key "
        f"{_where(create['key'])}, job {_where(create['job'])}"
    ]
    lookup = routes.get("lookup")
    if lookup:
        by = lookup["by"]
        lines.append(
            f"lookup: {lookup['method']} {lookup['path']} by {by['in']} {by['name']} "
            f"(the effect's {lookup['match']}) -> {lookup['status']}, 404 when none"
        )
    return lines


def _where(location: Mapping[str, Any] | None) -> str:
    if location is None:
        return "none"
    if location["in"] == "header":
        return f"header {location['name']}"
    return "body $." + ".".join(location["path"])
