"""The tools an MCP provider offers, as data: names, arguments and annotations per kind.

A provider started with ``--transport mcp`` serves these at ``/mcp`` (Model Context
Protocol, streamable HTTP) over the same store, faults and holds as its HTTP API: a
tool's write is the kind's write, its lookup the kind's lookup. Kept free of the ``mcp``
package so the harness and the oracle can read it without loading the SDK.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

TRANSPORTS = ("http", "mcp")
#: Where the MCP endpoint is mounted on a provider started with ``--transport mcp``.
MCP_PATH = "/mcp"
#: The arrival path of a tool call: the endpoint, then the tool (the oracle reads it).
TOOL_PATH_PREFIX = f"{MCP_PATH}/tools/"
#: The annotations of the MCP specification, spelled as on the wire.
HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")

Role = Literal["write", "lookup"]


@dataclass(frozen=True)
class ToolSpec:
    """One tool: what it does to the provider (``role``) and what it declares."""

    name: str
    role: Role
    description: str
    annotations: Mapping[str, bool] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return tool_path(self.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role,
            "path": self.path,
            "annotations": dict(self.annotations),
        }


#: Additive, retried safely under one key: the honest declaration of an idempotent write.
_KEYED_WRITE = {
    "readOnlyHint": False,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": True,
}
#: Additive, and every call is one more message.
_PLAIN_WRITE = {**_KEYED_WRITE, "idempotentHint": False}
_LOOKUP = {"readOnlyHint": True, "openWorldHint": True}


def tool_path(name: str) -> str:
    return f"{TOOL_PATH_PREFIX}{name}"


def tools_for(kind: str, write_hints: Mapping[str, bool] | None = None) -> tuple[ToolSpec, ...]:
    """The tools a ``kind`` provider serves; ``write_hints`` override its write tool's
    annotations (a server that declares what it does not do, for the oracle to catch)."""
    if kind == "idempotent":
        write = ToolSpec(
            "create_ticket",
            "write",
            "Open a ticket. Pass the job's document as `ticket` and one `idempotency_key` per "
            "logical job: a retry under the same key replays the first answer.",
            {**_KEYED_WRITE, **(write_hints or {})},
        )
        return (
            write,
            ToolSpec(
                "get_ticket",
                "lookup",
                "Look up the request made under `idempotency_key`: in_flight, completed "
                "(with its answer) or not found.",
                _LOOKUP,
            ),
        )
    write = ToolSpec(
        "send_message",
        "write",
        "Send a message. Pass the job's document as `message`, with a `client_marker` the "
        "caller chooses; every call sends one more message.",
        {**_PLAIN_WRITE, **(write_hints or {})},
    )
    if kind == "plain":
        return (
            write,
            ToolSpec(
                "find_messages",
                "lookup",
                "Every message sent with `client_marker` (none, one, or more).",
                _LOOKUP,
            ),
        )
    if kind == "unqueryable":
        # Like the HTTP kind's 501: there is no way to ask what was sent.
        return (write,)
    raise ValueError(f"provider kind={kind!r} has no tools")


def parse_hints(raw: str) -> dict[str, bool]:
    """``--tool-hints``: a JSON object of annotations and booleans, or ValueError why not."""
    try:
        doc = json.loads(raw)
    except ValueError:
        example = '{"idempotentHint": true}'
        raise ValueError(f"{raw!r} is not JSON; write an object like {example}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{raw!r} is not a JSON object")
    return check_hints(doc)


def check_hints(doc: Mapping[str, object]) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for name, value in doc.items():
        if name not in HINTS:
            raise ValueError(f"{name!r} is not an annotation; use {', '.join(HINTS)}")
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}")
        out[name] = value
    return out


__all__ = [
    "HINTS",
    "MCP_PATH",
    "TOOL_PATH_PREFIX",
    "TRANSPORTS",
    "ToolSpec",
    "check_hints",
    "parse_hints",
    "tool_path",
    "tools_for",
]
