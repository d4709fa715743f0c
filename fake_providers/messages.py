"""Requests and replies as plain values, so request handling needs no sockets."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fake_providers.problems import PROBLEM_TYPE, Problem

JSON_TYPE = "application/json"
_MAX_DIGITS = 100


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    headers: Mapping[str, str] = field(default_factory=dict)  # keys lower-case
    body: bytes = b""
    peer_pid: int | None = None


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes = b""
    content_type: str = JSON_TYPE
    headers: tuple[tuple[str, str], ...] = ()
    #: Close the connection without sending anything (after the work it describes).
    drop: bool = False
    #: The status the arrival records when it is not the one sent: Slack answers its
    #: errors with HTTP 200 and ``"ok": false``, which the oracle must still see as the
    #: error it is (a refused write is settled, a refused lookup is no reconcile).
    logged_status: int | None = None

    @property
    def recorded_status(self) -> int:
        """What the arrival records: ``logged_status`` if set, else the status sent."""
        return self.logged_status if self.logged_status is not None else self.status

    @classmethod
    def json(cls, status: int, value: Any, **kw: Any) -> Reply:
        return cls(status, json.dumps(value, separators=(",", ":")).encode(), **kw)

    @classmethod
    def problem(cls, p: Problem, *, instance: str | None = None) -> Reply:
        return cls(p.status, p.body(instance=instance), PROBLEM_TYPE, p.headers)


DROP = Reply(0, drop=True)


def first_param(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def json_object(req: Request) -> dict[str, Any]:
    """The body as a JSON object; an empty body is ``{}``."""
    return parse_object(req.body) if req.body else {}


def parse_object(raw: bytes) -> dict[str, Any]:
    """``raw`` as a JSON object, or a 400 saying why not."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise Problem(400, f"body is not JSON ({exc}); send a JSON object") from exc
    except RecursionError:
        # json.loads recurses once per nesting level; 1 MiB of brackets is far deeper.
        raise Problem(400, "body nests too deeply to parse; send a flatter JSON object") from None
    if not isinstance(data, dict):
        raise Problem(400, f"body is a JSON {type(data).__name__}; send a JSON object")
    return data


def non_negative_int(raw: str, name: str) -> int:
    """A query parameter that must be a plain decimal integer (ASCII digits only)."""
    # str.isdigit alone admits superscripts such as "²", which int() then refuses.
    if not (raw.isascii() and raw.isdigit()):
        raise Problem(400, f"{name}={raw!r} must be a non-negative integer")
    if len(raw) > _MAX_DIGITS:
        # int() refuses over 4300 digits (CVE-2020-10735), and no id or count gets near.
        raise Problem(400, f"{name} has {len(raw)} digits; it must fit in {_MAX_DIGITS}")
    return int(raw)
