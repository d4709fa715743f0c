"""SendGrid's v3 Mail Send API in front of the unqueryable kind.

``POST /v3/mail/send`` is the write: 202, an empty body and the ``X-Message-Id`` header,
every time (SendGrid has no idempotency key, so a retry is a second email). Nothing can
be looked up: SendGrid's Email Activity API (``GET /v3/messages...``) is a paid add-on,
and an account without it is refused with 403, which is what this persona answers, so a
worker that loses a send's answer can only send it to review.

The job is read from ``custom_args.job_id`` (the message's top level, else the first
personalization's), an optional client marker from ``custom_args.client_marker`` (same
places). The fingerprinted payload is the request body without the marker.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from fake_providers.fingerprint import canonical_json
from fake_providers.messages import JSON_TYPE, Reply, Request, parse_object
from fake_providers.personas.base import Created, Handler, Host, Parsed
from fake_providers.problems import Problem

_SEND = "/v3/mail/send"
_ACTIVITY = "/v3/messages"
_ERRORS_HELP = "https://www.twilio.com/docs/sendgrid/api-reference/mail-send/errors"
_MARKER = "client_marker"

#: What SendGrid itself says for errors a request's content does not explain.
_FIXED = {
    401: "The provided authorization grant is invalid, expired, or revoked",
    403: "access forbidden",
    404: "resource not found",
    405: "method not allowed",
    413: "The JSON payload you have included in your request is too large.",
    429: "too many requests",
}


class Invalid(Problem):
    """A Mail Send validation error: SendGrid names the offending ``field``."""

    def __init__(self, field: str | None, detail: str) -> None:
        super().__init__(400, detail)
        self.field = field


class SendGrid:
    name = "sendgrid"
    kind = "unqueryable"
    #: No idempotency, so nothing is ever replayed.
    replay_header: tuple[str, str] | None = None

    def routes(
        self, host: Host, req: Request, path: str, query: dict[str, list[str]]
    ) -> Mapping[str, Handler] | None:
        if path == _SEND:
            return {"POST": lambda: host.write(req, path, parse(req))}
        if path == _ACTIVITY or path.startswith(_ACTIVITY + "/"):
            return {"GET": lambda: _no_activity(host, req, path)}
        return None

    def created(self, parsed: Parsed, effect: Mapping[str, Any]) -> Created:
        msg_id = message_id(str(effect["external_id"]))
        body = parsed.payload
        first = body["personalizations"][0]
        obj = {
            "msg_id": msg_id,
            "from_email": body["from"]["email"],
            "to_email": first["to"][0]["email"],
            "subject": first.get("subject", body.get("subject")),
            "status": "processed",
            "job_id": parsed.job_id,
        }
        return Created(202, b"", msg_id, obj, headers=(("X-Message-Id", msg_id),))

    def error(self, problem: Problem, *, path: str) -> Reply:
        status = problem.status
        if problem.code == "no_lookup":
            # Email Activity without the add-on: SendGrid refuses, it does not 501.
            status = 403
            message = "authorization required"
        elif problem.code == "invalid_request" and status in (400, 422):
            status, message = 400, problem.detail
        else:
            message = _FIXED.get(status, problem.detail if status < 500 else "internal error")
        field = problem.field if isinstance(problem, Invalid) else None
        doc = {"errors": [{"message": message, "field": field, "help": _help(problem, message)}]}
        return Reply(status, json.dumps(doc).encode(), JSON_TYPE, problem.headers)


def _help(problem: Problem, message: str) -> str | None:
    """SendGrid's ``help`` is a link; the fake adds what happened when its message is a
    fixed phrase (an injected 503, an expired identity), so a log says why."""
    if problem.detail == message:
        return _ERRORS_HELP if isinstance(problem, Invalid) else None
    return problem.detail


def message_id(external_id: str) -> str:
    """A SendGrid-like ``X-Message-Id`` (22 url-safe characters), derived from the
    effect so the same effect always has the same id."""
    digest = hashlib.sha256(external_id.encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def parse(req: Request) -> Parsed | Problem:
    """A Mail Send request read into the job, marker and fingerprinted payload."""
    ctype = req.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != JSON_TYPE:
        return Problem(415, f"Content-Type {ctype or '(none)'!r}; send application/json")
    try:
        body = parse_object(req.body)
        canonical_json(body)
    except Problem as p:
        return Invalid(None, p.detail)
    except UnicodeEncodeError as exc:
        return Invalid(None, f"body holds a string that is not valid Unicode ({exc.reason})")
    try:
        _validate(body)
        job_id = _arg(body, "job_id")
        if job_id is None:
            raise Invalid(
                "custom_args",
                "custom_args.job_id is missing: put the job's id in the message's "
                "custom_args (or the first personalization's)",
            )
        marker = _arg(body, _MARKER)
    except Invalid as bad:
        return bad
    return Parsed(_without_marker(body), job_id, marker=marker, resource="message")


def _validate(body: dict[str, Any]) -> None:
    people = body.get("personalizations")
    if not isinstance(people, list) or not 1 <= len(people) <= 1000:
        raise Invalid(
            "personalizations",
            "The personalizations field is required and must have at least one "
            "personalization (at most 1000).",
        )
    for i, p in enumerate(people):
        to = p.get("to") if isinstance(p, dict) else None
        if not isinstance(to, list) or not to or not all(_has_email(t) for t in to):
            raise Invalid(
                f"personalizations.{i}.to",
                f"personalizations[{i}].to must be a non-empty list of {{'email': ...}}.",
            )
    if not _has_email(body.get("from")):
        raise Invalid("from.email", "The from object must be provided for every email send.")
    templated = isinstance(body.get("template_id"), str)
    subjects = [body.get("subject")] + [p.get("subject") for p in people]
    if not templated and not any(isinstance(s, str) and s for s in subjects):
        raise Invalid("subject", "The subject is required; set it or a template_id.")
    content = body.get("content")
    if not templated and (not isinstance(content, list) or not content):
        raise Invalid("content", "The content value must be a non-empty list of {type, value}.")
    for where in [body, *people]:
        args = where.get("custom_args", {})
        if not isinstance(args, dict) or not all(isinstance(v, str) for v in args.values()):
            raise Invalid("custom_args", "custom_args must be an object of string values.")


def _has_email(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("email"), str)


def _arg(body: dict[str, Any], name: str) -> str | None:
    """``custom_args[name]`` at the top level, else in the first personalization."""
    for args in (body.get("custom_args"), body["personalizations"][0].get("custom_args")):
        if isinstance(args, dict) and isinstance(args.get(name), str):
            return str(args[name])
    return None


def _without_marker(body: dict[str, Any]) -> dict[str, Any]:
    """The body without ``client_marker`` in any custom_args: the marker changes between
    a worker's attempts, the send it asks for does not."""

    def strip(d: dict[str, Any]) -> dict[str, Any]:
        args = d.get("custom_args")
        if not isinstance(args, dict) or _MARKER not in args:
            return d
        rest = {k: v for k, v in args.items() if k != _MARKER}
        return {**{k: v for k, v in d.items() if k != "custom_args"}, "custom_args": rest}

    out = strip(body)
    return {**out, "personalizations": [strip(p) for p in body["personalizations"]]}


def _no_activity(host: Host, req: Request, path: str) -> Reply:
    """A lookup-ish call: recorded as a lookup (a worker trying to reconcile is worth
    seeing), attributed to the job whose message id it names, and refused."""
    job_id = marker = None
    msg_id = path[len(_ACTIVITY) + 1 :]
    if msg_id:
        # The Email Activity msg_id starts with the X-Message-Id of the send.
        for obj in host.store.objects(resource="message", object_id=msg_id.split(".")[0]):
            job_id, marker = obj["job_id"], obj["client_marker"]

    def refuse() -> Reply:
        raise Problem(
            501,
            "Email Activity is a paid add-on this account lacks: a send cannot be looked "
            "up; treat an unknown outcome as review",
            code="no_lookup",
        )

    return host.lookup(req, path, job_id=job_id, marker=marker, answer=refuse)


PERSONA = SendGrid()
