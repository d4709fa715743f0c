"""Resend's Emails API in front of the idempotent kind.

``POST /emails`` with an ``Idempotency-Key`` header is the write: 200 ``{"id": ...}``.
The same key and payload again answers the same bytes (the same id, no second email,
and no header saying so: Resend documents none); the same key with another payload is
409 ``invalid_idempotent_request``, the same key while the first is still being handled
409 ``concurrent_idempotent_requests``. ``GET /emails/{id}`` is the lookup: the email
object, attributed to the job that sent it.

The job is read from the ``tags`` list, the tag named ``job_id``. Resend makes the key
optional; this provider models the idempotent kind, so a send without one is refused
(400 ``invalid_idempotency_key``). Errors are Resend's ``{statusCode, name, message}``.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from fake_providers.fingerprint import canonical_json
from fake_providers.messages import JSON_TYPE, Reply, Request, parse_object
from fake_providers.personas.base import Created, Handler, Host, Parsed
from fake_providers.problems import Problem

_EMAILS = "/emails"
_MAX_KEY = 256

#: A provider problem's code -> Resend's status and error name.
_BY_CODE: dict[str, tuple[int | None, str]] = {
    "key_in_flight": (409, "concurrent_idempotent_requests"),
    "key_mismatch": (409, "invalid_idempotent_request"),
    "missing_key": (400, "invalid_idempotency_key"),
    # Resend answers a revoked key 401/403; the SDKs keep the message of either.
    "session_expired": (401, "invalid_api_key"),
    "identity_changed": (403, "invalid_api_key"),
    "not_found": (404, "not_found"),
    "method_not_allowed": (405, "method_not_allowed"),
    "injected_failure": (None, "application_error"),
    "provider_bug": (500, "internal_server_error"),
}


class ResendProblem(Problem):
    """An error Resend names itself (``missing_required_field``, ...)."""

    def __init__(self, status: int, name: str, detail: str) -> None:
        super().__init__(status, detail)
        self.name = name


class Resend:
    name = "resend"
    kind = "idempotent"
    #: Resend's replay is the first answer repeated, with no flag of its own.
    replay_header: tuple[str, str] | None = None

    def routes(
        self, host: Host, req: Request, path: str, query: dict[str, list[str]]
    ) -> Mapping[str, Handler] | None:
        if path == _EMAILS:
            return {"POST": lambda: host.write(req, path, parse(req))}
        email_id = path[len(_EMAILS) + 1 :] if path.startswith(_EMAILS + "/") else ""
        # /emails/batch is Resend's batch send, which this persona leaves out: a 404.
        if email_id and "/" not in email_id and email_id != "batch":
            return {"GET": lambda: _retrieve(host, req, path, email_id)}
        return None

    def created(self, parsed: Parsed, effect: Mapping[str, Any]) -> Created:
        email_id = email_uuid(str(effect["external_id"]))
        body = parsed.payload
        at = datetime.fromtimestamp(float(effect["t_wall"]), UTC)
        obj = {
            "object": "email",
            "id": email_id,
            "to": _addresses(body.get("to")),
            "from": body["from"],
            "created_at": at.strftime("%Y-%m-%d %H:%M:%S.%f+00"),
            "subject": body["subject"],
            "html": body.get("html"),
            "text": body.get("text"),
            "bcc": _addresses(body.get("bcc")),
            "cc": _addresses(body.get("cc")),
            "reply_to": _addresses(body.get("reply_to")),
            "last_event": "delivered",
            "scheduled_at": body.get("scheduled_at"),
            "tags": body.get("tags", []),
        }
        answer = json.dumps({"id": email_id}, separators=(",", ":")).encode()
        return Created(200, answer, email_id, obj)

    def error(self, problem: Problem, *, path: str) -> Reply:
        status, name = _BY_CODE.get(problem.code, (None, ""))
        if isinstance(problem, ResendProblem):
            status, name = problem.status, problem.name
        status = status or problem.status
        if not name:
            name = "rate_limit_exceeded" if status == 429 else "validation_error"
        doc = {"statusCode": status, "name": name, "message": problem.detail}
        return Reply(status, json.dumps(doc).encode(), JSON_TYPE, problem.headers)


def email_uuid(external_id: str) -> str:
    """A uuid4-shaped email id derived from the effect: the same effect, the same id."""
    digest = hashlib.sha256(external_id.encode()).digest()[:16]
    return str(uuid.UUID(bytes=digest, version=4))


def parse(req: Request) -> Parsed | Problem:
    """A send read into the job, the key and the fingerprinted payload (the body)."""
    ctype = req.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != JSON_TYPE:
        return ResendProblem(
            400, "validation_error", f"Content-Type {ctype or '(none)'!r}; send application/json"
        )
    key = req.headers.get("idempotency-key")
    if key is not None and not 1 <= len(key) <= _MAX_KEY:
        return ResendProblem(
            400, "invalid_idempotency_key", f"The key must be between 1-{_MAX_KEY} chars."
        )
    try:
        body = parse_object(req.body)
        canonical_json(body)
        _validate(body)
    except ResendProblem as bad:
        return bad
    except Problem as p:
        return ResendProblem(400, "validation_error", p.detail)
    except UnicodeEncodeError as exc:
        return ResendProblem(400, "validation_error", f"a string is not valid Unicode: {exc}")
    job_id = next(t["value"] for t in body["tags"] if t["name"] == "job_id")
    return Parsed(body, job_id, key=key or None, resource="email")


def _validate(body: dict[str, Any]) -> None:
    for field in ("from", "to", "subject"):
        if field not in body:
            raise ResendProblem(422, "missing_required_field", f"Missing `{field}` field.")
    if not isinstance(body["from"], str) or not isinstance(body["subject"], str):
        raise ResendProblem(422, "validation_error", "`from` and `subject` must be strings.")
    to = body["to"] if isinstance(body["to"], list) else [body["to"]]
    if not 1 <= len(to) <= 50 or not all(isinstance(a, str) and a for a in to):
        raise ResendProblem(
            422, "validation_error", "`to` must be an address or a list of 1 to 50 of them."
        )
    tags = body.get("tags")
    if not isinstance(tags, list) or not all(
        isinstance(t, dict) and isinstance(t.get("name"), str) and isinstance(t.get("value"), str)
        for t in tags
    ):
        raise ResendProblem(
            422,
            "validation_error",
            '`tags` must be a list of {"name": ..., "value": ...} strings, one named job_id.',
        )
    if not any(t["name"] == "job_id" for t in tags):
        raise ResendProblem(
            422,
            "validation_error",
            'no tag named job_id: send tags=[{"name": "job_id", "value": <the job\'s id>}]',
        )


def _addresses(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _retrieve(host: Host, req: Request, path: str, email_id: str) -> Reply:
    """``GET /emails/{id}``: the lookup, for the job (and key) that sent the email."""
    found = host.store.objects(resource="email", object_id=email_id)
    job_id = found[0]["job_id"] if found else None
    key = None
    if found:
        effect_id = found[0]["effect_id"]
        key = next(
            (e["idempotency_key"] for e in host.store.effects() if e["id"] == effect_id), None
        )

    def answer() -> Reply:
        if not found:
            raise Problem(404, f"Email not found: no email has id {email_id!r}", code="not_found")
        return Reply(200, str(found[0]["body"]).encode(), JSON_TYPE)

    return host.lookup(req, path, job_id=job_id, key=key, answer=answer)


PERSONA = Resend()
