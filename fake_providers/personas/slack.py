"""Slack's Web API (``/api/<method>``) in front of the plain kind.

``chat.postMessage`` is the write: every call posts one more message (Slack has no
idempotency), one effect each. The job and its marker ride in Slack's message metadata,
``{"event_type": ..., "event_payload": {"job_id": ..., "client_marker": ...}}``, which
Slack stores with the message and gives back in ``conversations.history``: that read is
the lookup a worker reconciles with, finding its message by the marker in the metadata.

A history read names a channel, not a job, so it is recorded as one lookup arrival per
job that had tried to post to that channel before the read (by its write arrivals,
committed or not: a reconcile after a dropped post must count for that job), or as one
arrival with no job when none had. Write arrivals record the channel in their path
(``/api/chat.postMessage?channel=C123``) for that reason.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from fake_providers.messages import Reply, Request
from fake_providers.personas.base import Created, Handler, Host, Parsed
from fake_providers.personas.slack_wire import (
    SlackProblem,
    arguments,
    error_reply,
    json_arg,
    ok,
    token,
)
from fake_providers.problems import Problem

TEAM_ID = "T0CRASHPT"
BOT_USER_ID = "U0CRASHPT"
BOT_ID = "B0CRASHPT"
APP_ID = "A0CRASHPT"
_POST = "/api/chat.postMessage"
_HISTORY = "/api/conversations.history"
_MAX_LIMIT = 999


def _write_path(channel: str | None) -> str:
    return _POST if not channel else f"{_POST}?channel={quote(channel, safe='')}"


class SlackPersona:
    name = "slack"
    kind = "plain"
    replay_header: tuple[str, str] | None = None

    def routes(
        self, host: Host, req: Request, path: str, query: dict[str, list[str]]
    ) -> Mapping[str, Handler] | None:
        if not path.startswith("/api/"):
            return None
        method = path.removeprefix("/api/")
        if method == "chat.postMessage":
            return {"POST": lambda: self._post(host, req, query)}
        if method == "conversations.history":
            history = lambda: self._history(host, req, query)  # noqa: E731
            return {"GET": history, "POST": history}
        if method == "auth.test":
            auth = lambda: self._auth_test(req, query)  # noqa: E731
            return {"GET": auth, "POST": auth}

        def unknown() -> Reply:
            raise SlackProblem(
                404,
                f"{method!r} is not a method this Slack serves; it has chat.postMessage, "
                f"conversations.history and auth.test",
                error="unknown_method",
            )

        return {"GET": unknown, "POST": unknown}

    # -- chat.postMessage --------------------------------------------------------------

    def _post(self, host: Host, req: Request, query: dict[str, list[str]]) -> Reply:
        try:
            parsed: Parsed | Problem = self._parse_post(req, query)
        except Problem as p:
            parsed = p
        channel = parsed.extra["channel"] if isinstance(parsed, Parsed) else None
        return host.write(req, _write_path(channel), parsed)

    def _parse_post(self, req: Request, query: dict[str, list[str]]) -> Parsed:
        args = arguments(req, query)
        _need_token(req, args)
        channel = args.get("channel")
        if not isinstance(channel, str) or not channel.strip():
            raise SlackProblem(404, "channel is missing; name one", error="channel_not_found")
        if not any(args.get(k) for k in ("text", "blocks", "attachments")):
            raise SlackProblem(400, "send text, blocks or attachments", error="no_text")
        metadata = json_arg(args, "metadata")
        payload_doc = metadata.get("event_payload") if isinstance(metadata, dict) else None
        if not isinstance(metadata, dict) or not isinstance(metadata.get("event_type"), str):
            raise SlackProblem(
                422,
                'metadata is missing or has no event_type; send metadata={"event_type": '
                '"crashpoint_job", "event_payload": {"job_id": ..., "client_marker": ...}}',
                error="invalid_metadata_schema",
            )
        if not isinstance(payload_doc, dict):
            raise SlackProblem(
                422,
                "metadata.event_payload is missing; it carries job_id and client_marker",
                error="invalid_metadata_schema",
            )
        job_id, marker = payload_doc.get("job_id"), payload_doc.get("client_marker")
        for field, value in (("job_id", job_id), ("client_marker", marker)):
            if not isinstance(value, str) or not value:
                raise SlackProblem(
                    422,
                    f"metadata.event_payload.{field}={value!r}; send the job's {field} "
                    f"as a non-empty string",
                    error="invalid_metadata_schema",
                )
        kept = {k: v for k, v in payload_doc.items() if k != "client_marker"}
        payload = {k: v for k, v in args.items() if k not in ("token", "metadata")}
        payload["metadata"] = {"event_type": metadata["event_type"], "event_payload": kept}
        return Parsed(
            payload=payload,
            job_id=str(job_id),
            marker=str(marker),
            resource="message",
            extra={
                "channel": channel,
                "args": {k: v for k, v in args.items() if k not in ("token", "metadata")},
                "metadata": {"event_type": metadata["event_type"], "event_payload": payload_doc},
            },
        )

    def created(self, parsed: Parsed, effect: Mapping[str, Any]) -> Created:
        # The ts is Slack's message id: seconds of the commit, then the effect id, so it
        # is unique, ordered and derived from the effect, never drawn.
        ts = f"{int(effect['t_wall'])}.{int(effect['id']):06d}"
        args = parsed.extra["args"]
        message: dict[str, Any] = {
            "user": BOT_USER_ID,
            "type": "message",
            "ts": ts,
            "bot_id": BOT_ID,
            "app_id": APP_ID,
            "text": args.get("text") or "",
            "team": TEAM_ID,
        }
        for name in ("blocks", "attachments", "thread_ts"):
            value = json_arg(args, name)
            if value:
                message[name] = value
        message["metadata"] = parsed.extra["metadata"]
        channel = parsed.extra["channel"]
        body = {"ok": True, "channel": channel, "ts": ts, "message": message}
        return Created(
            status=200,
            body=json.dumps(body, separators=(",", ":")).encode(),
            object_id=ts,
            obj={"channel": channel, "message": message},
        )

    # -- conversations.history ----------------------------------------------------------

    def _history(self, host: Host, req: Request, query: dict[str, list[str]]) -> Reply:
        args = arguments(req, query)
        channel = args.get("channel") if isinstance(args.get("channel"), str) else None
        jobs = _jobs_that_posted(host, channel)
        answered: list[Reply] = []

        def answer() -> Reply:
            if not answered:  # one read, however many jobs it answers for
                answered.append(self._history_answer(host, req, args, channel))
            return answered[0]

        path = _HISTORY if not channel else f"{_HISTORY}?channel={quote(channel, safe='')}"
        reply = Reply(0)
        tried: list[tuple[str | None, str | None]] = [*jobs] or [(None, None)]
        for job_id, marker in tried:
            reply = host.lookup(req, path, job_id=job_id, marker=marker, answer=answer)
            if reply.recorded_status != 200:
                break  # the read failed: the response is this failure
        return reply

    def _history_answer(
        self, host: Host, req: Request, args: dict[str, Any], channel: str | None
    ) -> Reply:
        _need_token(req, args)
        if not channel:
            raise SlackProblem(404, "channel is missing; name one", error="channel_not_found")
        oldest = _ts_arg(args, "oldest", 0.0)
        latest = _ts_arg(args, "latest", float("inf"))
        inclusive = str(args.get("inclusive", "")).lower() in ("1", "true")
        limit = _int_arg(args, "limit", 100, "invalid_limit")
        start = _cursor(args.get("cursor"))
        messages = []
        for row in reversed(host.store.objects(resource="message")):
            kept = json.loads(row["body"])
            ts = float(kept["message"]["ts"])
            low = ts >= oldest if inclusive else ts > oldest
            high = ts <= latest if inclusive else ts < latest
            if kept["channel"] == channel and low and high:
                messages.append(kept["message"])
        page = messages[start : start + max(1, min(limit, _MAX_LIMIT))]
        more = start + len(page) < len(messages)
        next_cursor = (
            base64.b64encode(f"offset:{start + len(page)}".encode()).decode() if more else ""
        )
        return ok(
            {
                "messages": page,
                "has_more": more,
                "pin_count": 0,
                "channel_actions_ts": None,
                "channel_actions_count": 0,
                "response_metadata": {"next_cursor": next_cursor},
            }
        )

    # -- auth.test ------------------------------------------------------------------

    def _auth_test(self, req: Request, query: dict[str, list[str]]) -> Reply:
        _need_token(req, arguments(req, query))
        return ok(
            {
                "url": "https://crashpoint.slack.com/",
                "team": "crashpoint",
                "user": "crashpoint-bot",
                "team_id": TEAM_ID,
                "user_id": BOT_USER_ID,
                "bot_id": BOT_ID,
                "is_enterprise_install": False,
            }
        )

    def error(self, problem: Problem, *, path: str) -> Reply:
        return error_reply(problem)


def _need_token(req: Request, args: dict[str, Any]) -> None:
    if token(req, args) is None:
        raise SlackProblem(
            401,
            "no token; send Authorization: Bearer xoxb-... (any token is accepted)",
            error="not_authed",
        )


def _jobs_that_posted(host: Host, channel: str | None) -> list[tuple[str, str | None]]:
    """Each job that tried to post to ``channel`` so far, with its first marker."""
    if not channel:
        return []
    path = _write_path(channel)
    seen: dict[str, str | None] = {}
    for a in host.store.arrivals():
        if a["kind"] == "write" and a["path"] == path and a["job_id"]:
            seen.setdefault(a["job_id"], a["client_marker"])
    return list(seen.items())


def _ts_arg(args: dict[str, Any], name: str, default: float) -> float:
    raw = args.get(name)
    if raw in (None, ""):
        return default
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise SlackProblem(
            400, f"{name}={raw!r} is not a Slack timestamp", error="invalid_ts_" + name
        ) from None


def _int_arg(args: dict[str, Any], name: str, default: int, error: str) -> int:
    raw = args.get(name)
    if raw in (None, ""):
        return default
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.isascii() and raw.isdigit() and len(raw) < 10:
        return int(raw)
    raise SlackProblem(400, f"{name}={raw!r} must be a positive integer", error=error)


def _cursor(raw: Any) -> int:
    if raw in (None, ""):
        return 0
    try:
        text = base64.b64decode(str(raw), validate=True).decode()
        if text.startswith("offset:") and text[7:].isdigit():
            return int(text[7:])
    except (binascii.Error, UnicodeDecodeError):
        pass
    raise SlackProblem(400, f"cursor={raw!r} is not one this API gave", error="invalid_cursor")


PERSONA = SlackPersona()
