"""Requests and replies as plain values, so request handling needs no sockets."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fake_providers.problems import PROBLEM_TYPE, Problem

JSON_TYPE = "application/json"


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

    @classmethod
    def json(cls, status: int, value: Any, **kw: Any) -> Reply:
        return cls(status, json.dumps(value, separators=(",", ":")).encode(), **kw)

    @classmethod
    def problem(cls, p: Problem, *, instance: str | None = None) -> Reply:
        return cls(p.status, p.body(instance=instance), PROBLEM_TYPE)


DROP = Reply(0, drop=True)


def first_param(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def json_object(req: Request) -> dict[str, Any]:
    if not req.body:
        return {}
    try:
        data = json.loads(req.body)
    except ValueError as exc:
        raise Problem(400, f"body is not JSON ({exc}); send a JSON object") from exc
    if not isinstance(data, dict):
        raise Problem(400, f"body is a JSON {type(data).__name__}; send a JSON object")
    return data
