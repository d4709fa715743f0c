"""A declared HTTP API (``kind = "http"``): an in-house service served from its route table.

The table (read and checked by ``harness/targets/config_routes.py``, handed over as JSON)
says which method and path create an effect, where the idempotency key, the job's id and
a marker ride (a header, or a body field by path), which route looks an effect up and by
what, and the status and body of each answer, a template over the stored effect
(``{effect.id}``, ``{effect.key}``, ``{effect.job}``, ``{effect.marker}``).

Everything else is the provider's, as for every persona: the store, the fault board and
ground truth. The kind follows the table: a key makes it idempotent (the same key and
body again answers the same bytes, with no second effect), a lookup without one plain, and
neither unqueryable. A lookup that finds nothing answers 404 with ``not_found``'s body.
Errors are ``{"error": code, "message": detail}`` with the provider's status.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

from fake_providers.messages import JSON_TYPE, Reply, Request, first_param, parse_object
from fake_providers.personas.base import Created, Handler, Host, Parsed
from fake_providers.problems import Problem

#: The store's resource name for what a declared create makes.
RESOURCE = "record"
TEXT_TYPE = "text/plain; charset=utf-8"
_PLACEHOLDER = re.compile(r"\{effect\.([a-z]+)\}")


def declared_kind(routes: Mapping[str, Any]) -> str:
    """The kind a route table has: a key makes it idempotent, a lookup without one plain,
    neither unqueryable."""
    if routes["create"]["key"] is not None:
        return "idempotent"
    return "plain" if routes.get("lookup") else "unqueryable"


def render(template: str, fields: Mapping[str, str]) -> tuple[bytes, str]:
    """``template`` with each ``{effect.X}`` replaced (escaped as inside a JSON string),
    and its content type: JSON if the result parses as JSON, else plain text."""
    text = _PLACEHOLDER.sub(lambda m: json.dumps(fields.get(m[1], ""))[1:-1], template)
    try:
        json.loads(text)
    except ValueError:
        return text.encode(), TEXT_TYPE
    return text.encode(), JSON_TYPE


def pick(req: Request, body: Mapping[str, Any], location: Mapping[str, Any] | None) -> str | None:
    """The string at ``location`` (a header, or a body field by path); None if absent."""
    if location is None:
        return None
    if location["in"] == "header":
        return req.headers.get(location["name"]) or None
    value: Any = body
    for part in location["path"]:
        value = value.get(part) if isinstance(value, dict) else None
    return value if isinstance(value, str) and value else None


def _without(body: dict[str, Any], location: Mapping[str, Any] | None) -> None:
    """Drop the field at ``location`` from ``body``: the key and marker name the request,
    they are not what "the same request" means."""
    if location is None or location["in"] != "body":
        return
    *parents, last = location["path"]
    node: Any = body
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(last, None)


class Declared:
    """The persona for one route table (one instance per provider process)."""

    name = "http"
    replay_header: tuple[str, str] | None = None

    def __init__(self, table: Mapping[str, Any]) -> None:
        self.table = table
        self.kind = declared_kind(table)
        lookup = table.get("lookup")
        self._lookup_path: re.Pattern[str] | None = None
        if lookup:
            parts = re.split(r"\{[^{}]*\}", lookup["path"])
            self._lookup_path = re.compile("([^/]+)".join(re.escape(p) for p in parts) + "$")

    def routes(
        self, host: Host, req: Request, path: str, query: dict[str, list[str]]
    ) -> Mapping[str, Handler] | None:
        create, lookup = self.table["create"], self.table.get("lookup")
        out: dict[str, Handler] = {}
        if path == create["path"]:
            out[create["method"]] = lambda: host.write(req, path, self.parse(req))
        matched = self._lookup_path.match(path) if self._lookup_path is not None else None
        if lookup and matched is not None:
            by = lookup["by"]
            value = matched[1] if by["in"] == "path" else first_param(query, by["name"])
            out[lookup["method"]] = lambda: self._lookup(host, req, path, value)
        return out or None

    def parse(self, req: Request) -> Parsed | Problem:
        """A create read into the job, the key, the marker and the fingerprinted body."""
        create = self.table["create"]
        try:
            body = parse_object(req.body) if req.body else {}
        except Problem as p:
            return p
        job_id = pick(req, body, create["job"])
        if job_id is None:
            return Problem(400, f"the job's id is missing: send it in {_said(create['job'])}")
        key = pick(req, body, create["key"])
        if create["key"] is not None and key is None:
            where = _said(create["key"])
            return Problem(400, f"the idempotency key is missing from {where}", code="missing_key")
        marker = pick(req, body, create["marker"])
        payload = copy.deepcopy(body)
        _without(payload, create["key"])
        _without(payload, create["marker"])
        return Parsed(payload, job_id, key=key, marker=marker, resource=RESOURCE)

    def created(self, parsed: Parsed, effect: Mapping[str, Any]) -> Created:
        fields = {
            "id": str(effect["external_id"]),
            "key": parsed.key or "",
            "job": parsed.job_id or "",
            "marker": parsed.marker or "",
        }
        create = self.table["create"]
        # Sent as JSON, as an in-house API's create answers; replayed byte for byte.
        body, _ = render(create["body"], fields)
        return Created(create["status"], body, fields["id"], fields)

    def error(self, problem: Problem, *, path: str) -> Reply:
        doc = {"error": problem.code or "error", "message": problem.detail}
        return Reply(problem.status, json.dumps(doc).encode(), JSON_TYPE, problem.headers)

    def _lookup(self, host: Host, req: Request, path: str, value: str | None) -> Reply:
        lookup = self.table["lookup"]
        match = lookup["match"]
        found = [
            o
            for o in host.store.objects(resource=RESOURCE)
            if value and (o["object_id"] if match == "id" else _field(o, match)) == value
        ]
        job_id = found[0]["job_id"] if found else None
        key = _field(found[0], "key") if found else (value if match == "key" else None)
        marker = value if match == "marker" else None

        def answer() -> Reply:
            if not found:
                body, ctype = render(lookup["not_found"], {})
                return Reply(404, body, ctype)
            body, ctype = render(lookup["body"], json.loads(found[0]["body"]))
            return Reply(lookup["status"], body, ctype)

        return host.lookup(req, path, job_id=job_id, key=key or None, marker=marker, answer=answer)


def _field(obj: Mapping[str, Any], name: str) -> str | None:
    value = json.loads(obj["body"]).get(name)
    return value if isinstance(value, str) and value else None


def _said(location: Mapping[str, Any]) -> str:
    if location["in"] == "header":
        return f"the {location['name']} header"
    return "body $." + ".".join(location["path"])
