"""Stripe's v1 API for PaymentIntents, Refunds and Customers, over the idempotent kind.

Creates (``POST /v1/payment_intents``, ``/v1/refunds``, ``/v1/customers``) are the
kind's writes: the key is the ``Idempotency-Key`` header, the job is
``metadata[job_id]``, the fingerprint covers every form parameter. Retrieves, lists and
searches are lookups recorded for the job they concern. Errors come in Stripe's
``{"error": {...}}`` envelope with Stripe's statuses, so each SDK raises its own
exception type; every answer carries a ``Request-Id``.

A POST without ``Idempotency-Key`` is refused (400), though Stripe takes it: the
provider's idempotent kind needs a key to judge writes, and minting one here would
record a key no client sent. Both official SDKs send a key on every POST.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from fake_providers.messages import JSON_TYPE, Reply, Request, non_negative_int
from fake_providers.personas.base import Created, Handler, Host, Parsed
from fake_providers.personas.stripe_form import (
    StripeProblem,
    bad_param,
    decode_form,
    decode_pairs,
    parse_query,
)
from fake_providers.personas.stripe_objects import RESOURCES, Resource, build, parse_create
from fake_providers.problems import Problem

_BY_NAME = {r.name: r for r in RESOURCES}
_BY_PATH = {r.path: r for r in RESOURCES}
_MAX_LIMIT = 100

#: The provider's problem codes as Stripe's (status, type, code).
_ERRORS: dict[str, tuple[int | None, str, str | None]] = {
    "missing_key": (400, "invalid_request_error", "parameter_missing"),
    "key_in_flight": (409, "idempotency_error", "idempotency_key_in_use"),
    "key_mismatch": (400, "idempotency_error", None),
    "injected_failure": (None, "api_error", None),
    "provider_bug": (500, "api_error", None),
    "session_expired": (401, "authentication_error", "api_key_expired"),
    "identity_changed": (403, "permission_error", None),
    "not_found": (404, "invalid_request_error", None),
    "method_not_allowed": (404, "invalid_request_error", None),
}


_NO_KEY = (
    "This POST carries no Idempotency-Key header. Real Stripe would take it, but "
    "crashpoint's Stripe persona refuses it: the oracle judges writes by their key. Pass "
    "idempotency_key= (one per logical job) or let a Stripe SDK send its own."
)


class StripePersona:
    name = "stripe"
    kind = "idempotent"
    replay_header: tuple[str, str] | None = ("Idempotent-Replayed", "true")

    def routes(
        self, host: Host, req: Request, path: str, query: dict[str, list[str]]
    ) -> Mapping[str, Handler] | None:
        top = _BY_PATH.get(path)
        if top is not None:
            return {
                "POST": _stamped(req, lambda: self._create(host, req, path, top)),
                "GET": _stamped(req, lambda: self._list(host, req, path, top, query)),
            }
        parent, _, tail = path.rpartition("/")
        res = _BY_PATH.get(parent)
        if res is None or not tail:
            return None
        if tail == "search" and res.search_fields is not None:
            return {"GET": _stamped(req, lambda: self._search(host, req, path, res, query))}
        return {"GET": _stamped(req, lambda: self._retrieve(host, req, path, res, tail))}

    def created(self, parsed: Parsed, effect: Mapping[str, Any]) -> Created:
        obj = build(_BY_NAME[parsed.resource], parsed, effect)
        body = json.dumps(obj, indent=2).encode()  # Stripe answers pretty-printed JSON
        return Created(200, body, obj["id"], obj)

    def error(self, problem: Problem, *, path: str) -> Reply:
        status, etype, code = _ERRORS.get(problem.code, (None, "invalid_request_error", None))
        status = status or problem.status
        if status >= 500:
            etype = "api_error"
        elif status in (400, 415, 422) and problem.code == "invalid_request":
            status = 400
        message = _NO_KEY if problem.code == "missing_key" else problem.detail
        doc: dict[str, Any] = {"type": etype, "message": message}
        if isinstance(problem, StripeProblem):
            code = problem.stripe_code or code
            if problem.param is not None:
                doc["param"] = problem.param
        if code is not None:
            doc["code"] = code
            doc["doc_url"] = f"https://stripe.com/docs/error-codes/{code.replace('_', '-')}"
        headers = tuple(h for h in problem.headers if h[0].lower() != "allow")
        body = json.dumps({"error": doc}, indent=2).encode()
        return Reply(status, body, JSON_TYPE, (*headers, ("Request-Id", _request_id())))

    # -- writes -----------------------------------------------------------------------

    def _create(self, host: Host, req: Request, path: str, res: Resource) -> Reply:
        key = req.headers.get("idempotency-key") or None
        parsed: Parsed | Problem
        try:
            params = decode_form(req.body, req.headers.get("content-type", ""))
            parsed = parse_create(res, params, key, host.store)
        except Problem as p:
            parsed = p
        reply = host.write(req, path, parsed)
        if key is not None and not reply.drop:
            reply = dataclasses.replace(reply, headers=(*reply.headers, ("Idempotency-Key", key)))
        return reply

    # -- lookups ----------------------------------------------------------------------

    def _retrieve(self, host: Host, req: Request, path: str, res: Resource, oid: str) -> Reply:
        rows = host.store.objects(resource=res.name, object_id=oid)
        job = rows[0]["job_id"] if rows else None

        def answer() -> Reply:
            if not rows:
                raise StripeProblem(
                    404,
                    f"No such {res.name}: '{oid}'",
                    code="not_found",
                    stripe_code="resource_missing",
                    param="id",
                )
            return _json(rows[0]["body"])

        return host.lookup(req, path, job_id=job, answer=answer)

    def _list(
        self, host: Host, req: Request, path: str, res: Resource, query: dict[str, list[str]]
    ) -> Reply:
        try:
            params = _query_params(query)
            limit = _limit(params)
            filters = {k: v for k, v in params.items() if k in res.list_filters}
            for name in params:
                if name not in res.list_filters | {"limit", "starting_after", "ending_before"}:
                    raise bad_param(f"Received unknown parameter: {name}", name)
            found = _objects(host, res)
            objs = [o for o in found if all(o.get(k) == v for k, v in filters.items())]
            objs.reverse()  # newest first, as Stripe lists
            page, has_more = _page(objs, limit, params)
        except Problem as p:
            return host.lookup(req, path, job_id=None, answer=_raise(p))
        doc = {"object": "list", "data": page, "has_more": has_more, "url": res.path}
        job = _one_job(found, page)
        return host.lookup(req, path, job_id=job, answer=lambda: Reply.json(200, doc))

    def _search(
        self, host: Host, req: Request, path: str, res: Resource, query: dict[str, list[str]]
    ) -> Reply:
        assert res.search_fields is not None
        try:
            params = _query_params(query)
            text = params.get("query")
            if not isinstance(text, str) or not text.strip():
                raise bad_param("Missing required param: query.", "query", "parameter_missing")
            q = parse_query(text, res.search_fields)
            limit = _limit(params)
            start = _page_token(params.get("page"))
            found = _objects(host, res)
            hits = [o for o in found if q.matches(o)]
            hits.reverse()
            page = hits[start : start + limit]
        except Problem as p:
            return host.lookup(req, path, job_id=None, answer=_raise(p))
        more = start + limit < len(hits)
        doc = {
            "object": "search_result",
            "data": page,
            "has_more": more,
            "next_page": f"page_{start + limit}" if more else None,
            "url": path,
        }
        job = q.job_id() or _one_job(found, page)
        return host.lookup(req, path, job_id=job, answer=lambda: Reply.json(200, doc))


def _stamped(req: Request, handler: Handler) -> Handler:
    """``handler`` whose answer carries a Request-Id, as every Stripe answer does (the
    provider replays a stored body with its own headers, so the stamp goes on here)."""

    def run() -> Reply:
        reply = handler()
        if reply.drop or any(h[0].lower() == "request-id" for h in reply.headers):
            return reply
        return dataclasses.replace(reply, headers=(*reply.headers, ("Request-Id", _request_id())))

    return run


def _request_id() -> str:
    return "req_" + secrets.token_urlsafe(10).replace("-", "x").replace("_", "y")


def _json(body: str) -> Reply:
    return Reply(200, json.dumps(json.loads(body), indent=2).encode(), JSON_TYPE)


def _raise(p: Problem) -> Callable[[], Reply]:
    def answer() -> Reply:
        raise p

    return answer


class _Objects(list[dict[str, Any]]):
    """A resource's stored objects, oldest first, with the job each belongs to."""

    jobs: dict[str, str | None]


def _objects(host: Host, res: Resource) -> _Objects:
    out = _Objects()
    out.jobs = {}
    for row in host.store.objects(resource=res.name):
        out.append(json.loads(row["body"]))
        out.jobs[row["object_id"]] = row["job_id"]
    return out


def _one_job(found: _Objects, page: list[dict[str, Any]]) -> str | None:
    """The job every object of ``page`` belongs to, if there is exactly one (so a worker
    that reconciles by listing is credited with a lookup for its job)."""
    jobs = {found.jobs.get(o["id"]) for o in page}
    return jobs.pop() if len(jobs) == 1 else None


def _query_params(query: dict[str, list[str]]) -> dict[str, Any]:
    return decode_pairs([(k, v) for k, vs in query.items() for v in vs])


def _limit(params: Mapping[str, Any]) -> int:
    raw = params.get("limit")
    if raw is None:
        return 10
    limit = non_negative_int(str(raw), "limit") if isinstance(raw, str) else 0
    if not 1 <= limit <= _MAX_LIMIT:
        raise bad_param(f"Invalid limit: {raw}; send 1 to {_MAX_LIMIT}", "limit")
    return limit


def _page(
    objs: list[dict[str, Any]], limit: int, params: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], bool]:
    """One page of a newest-first list, after ``starting_after`` or before ``ending_before``."""
    ids = [o["id"] for o in objs]
    for name in ("starting_after", "ending_before"):
        cursor = params.get(name)
        if cursor is None:
            continue
        if cursor not in ids:
            raise StripeProblem(
                404,
                f"No such object: '{cursor}'",
                code="not_found",
                stripe_code="resource_missing",
                param=name,
            )
        at = ids.index(cursor)
        if name == "starting_after":
            rest = objs[at + 1 :]
            return rest[:limit], len(rest) > limit
        before = objs[:at]
        return before[-limit:], len(before) > limit
    return objs[:limit], len(objs) > limit


def _page_token(raw: Any) -> int:
    if raw is None:
        return 0
    if not isinstance(raw, str) or not raw.startswith("page_"):
        raise bad_param(f"Invalid page: {raw!r}; pass the next_page of a search", "page")
    try:
        return non_negative_int(raw.removeprefix("page_"), "page")
    except Problem:
        raise bad_param(f"Invalid page: {raw!r}; pass the next_page of a search", "page") from None


PERSONA = StripePersona()
