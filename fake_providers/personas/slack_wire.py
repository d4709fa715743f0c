"""Slack's Web API wire: reading a method's arguments and writing its answers.

Slack takes every method's arguments in the query string, a form body
(``@slack/web-api`` posts ``application/x-www-form-urlencoded`` with objects as JSON
text) or a JSON body (``slack_sdk`` posts ``chat.postMessage`` as JSON), and answers
every business error with HTTP 200 and ``{"ok": false, "error": "..."}``; only rate
limits (429) and outages (5xx) use the status line.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

from fake_providers.messages import Reply, Request
from fake_providers.problems import Problem

#: What each of the provider's problem codes is in Slack's error vocabulary.
SLACK_ERRORS = {
    "invalid_request": "invalid_arguments",
    "session_expired": "token_expired",
    "identity_changed": "invalid_auth",
    "not_found": "unknown_method",
    "method_not_allowed": "method_not_supported_for_channel_type",
}
#: Outage statuses by the error Slack names them with.
_OUTAGES = {500: "internal_error", 503: "service_unavailable"}
#: Slack's Retry-After for a rate limit: its smallest (seconds).
RETRY_AFTER_S = 1


class SlackProblem(Problem):
    """A Problem naming the Slack error string to answer (``channel_not_found``)."""

    def __init__(self, status: int, detail: str, *, error: str) -> None:
        super().__init__(status, detail)
        self.slack_error = error


def arguments(req: Request, query: dict[str, list[str]]) -> dict[str, Any]:
    """A method's arguments: the query string's, overridden by the body's."""
    args: dict[str, Any] = {k: v[0] for k, v in query.items() if v}
    if not req.body:
        return args
    ctype = req.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype == "application/json":
        try:
            body = json.loads(req.body)
        except ValueError as exc:
            raise SlackProblem(
                400, f"body is not JSON ({exc}); send a JSON object", error="invalid_json"
            ) from exc
        if not isinstance(body, dict):
            raise SlackProblem(400, "JSON body is not an object; send one", error="json_not_object")
        args.update(body)
    elif ctype == "application/x-www-form-urlencoded":
        text = req.body.decode("utf-8", "replace")
        args.update({k: v[0] for k, v in parse_qs(text, keep_blank_values=True).items()})
    else:
        raise SlackProblem(
            415,
            f"Content-Type {ctype or '(none)'!r}; send application/json or a form",
            error="invalid_form_data",
        )
    return args


def token(req: Request, args: dict[str, Any]) -> str | None:
    """The caller's token: ``Authorization: Bearer`` or the ``token`` argument."""
    auth = req.headers.get("authorization", "")
    if auth.lower().startswith("bearer ") and auth[7:].strip():
        return auth[7:].strip()
    value = args.get("token")
    return value if isinstance(value, str) and value else None


def json_arg(args: dict[str, Any], name: str) -> Any:
    """An argument that may be an object or (form-encoded) its JSON text."""
    value = args.get(name)
    if isinstance(value, str) and value.strip().startswith(("{", "[")):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise SlackProblem(
                400, f"{name} is not valid JSON ({exc})", error=f"invalid_{name}_format"
            ) from exc
    return value


def ok(value: dict[str, Any], headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    return Reply.json(200, {"ok": True, **value}, headers=headers)


def error_reply(problem: Problem) -> Reply:
    """``problem`` as Slack answers it; the arrival still records the problem's status."""
    headers = problem.headers
    if problem.status == 429:
        headers = (*headers, ("Retry-After", str(RETRY_AFTER_S)))
        return Reply.json(429, {"ok": False, "error": "ratelimited"}, headers=headers)
    if problem.status >= 500:
        error = _OUTAGES.get(problem.status, "fatal_error")
        return Reply.json(problem.status, {"ok": False, "error": error}, headers=headers)
    error = getattr(problem, "slack_error", None) or SLACK_ERRORS.get(
        problem.code, "invalid_arguments"
    )
    body: dict[str, Any] = {"ok": False, "error": error}
    if error in ("invalid_arguments", "invalid_metadata_schema"):
        body["response_metadata"] = {"messages": [f"[ERROR] {problem.detail}"]}
    else:
        body["detail"] = problem.detail
    return Reply.json(200, body, headers=headers, logged_status=problem.status)
