"""Tool calls through the official MCP client, classified the way the protocol needs.

Each call opens a fresh client on the server's streamable HTTP endpoint (the servers are
stateless), sends ``X-Worker-Id`` and ``X-Fencing-Token`` with it, and reads the tool's
structured answer: ``{"status", "replayed", "body"}``, the provider's HTTP answer.

A write ends ``ok``, ``failed`` (a 5xx, or the client never reached the server: nothing
can have been committed), ``unknown`` (no answer once ``tools/call`` was sent: a timeout,
a reset; or 409, the same key still in flight), ``conflict`` (422) or ``refused``. A
lookup ends like the RQ example's: ``confirmed``, ``not_found``, ``conflict``,
``in_flight``, ``unavailable`` or ``unqueryable`` (the server offers no lookup tool).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from rqbilling.providers import Found, Sent, _by_key, _by_marker

from mcpagent.settings import Server

#: The write and lookup tool of each kind of server.
WRITE_TOOL = {"idempotent": "create_ticket", "plain": "send_message", "unqueryable": "send_message"}
LOOKUP_TOOL = {"idempotent": "get_ticket", "plain": "find_messages"}

# A broken connection is an outcome here, not an error to print a traceback for.
logging.getLogger("mcp").setLevel(logging.CRITICAL)


class NotSent(Exception):
    """The client never got as far as sending ``tools/call``."""


class Unanswered(Exception):
    """``tools/call`` was sent and no answer came back (a timeout, a reset)."""


class Tools:
    def __init__(self, *, worker_id: str, timeout_s: float) -> None:
        self.worker_id = worker_id
        self.timeout_s = timeout_s

    def _call(self, server: Server, tool: str, arguments: dict[str, Any], token: int) -> Any:
        """The tool's structured answer; NotSent, or any other exception once sent."""
        return asyncio.run(
            asyncio.wait_for(self._acall(server, tool, arguments, token), 2 * self.timeout_s)
        )

    async def _acall(self, server: Server, tool: str, arguments: dict[str, Any], token: int) -> Any:
        headers = {"X-Worker-Id": self.worker_id, "X-Fencing-Token": str(token)}
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(self.timeout_s))
        transport = streamable_http_client(server.endpoint, http_client=http)
        client = Client(transport, read_timeout_seconds=self.timeout_s, cache=None)
        sent = False
        try:
            async with http, client as c:
                sent = True
                result = await c.call_tool(tool, arguments)
        except (Exception, asyncio.CancelledError) as exc:
            # A broken connection fails the client's task group, which cancels the call:
            # the cancellation is how "no answer" arrives, not a reason to stop.
            if not sent:
                raise NotSent(_name(exc)) from None
            raise Unanswered(_name(exc)) from None
        doc = result.structured_content
        if not isinstance(doc, dict) or "status" not in doc:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            return {"status": 400, "body": text[:200]}
        return doc

    def write(self, server: Server, doc: dict[str, Any], *, key: str, token: int) -> Sent:
        tool = WRITE_TOOL[server.kind]
        if server.kind == "idempotent":
            arguments: dict[str, Any] = {"ticket": doc, "idempotency_key": key}
        else:
            # No key on a plain server: the marker is how a lookup finds the message again.
            arguments = {"message": {**doc, "client_marker": key}}
        try:
            answer = self._call(server, tool, arguments, token)
        except NotSent as exc:
            return Sent("failed", f"{tool} not sent ({exc})")
        except (Unanswered, TimeoutError) as exc:
            return Sent("unknown", f"{tool}: no answer ({exc or type(exc).__name__})")
        status = int(answer.get("status") or 0)
        body = answer.get("body")
        if 200 <= status < 300:
            ref = body.get("id") if isinstance(body, dict) else None
            return Sent("ok", f"{tool} {status}", None if ref is None else str(ref))
        if status == 409:
            return Sent("unknown", f"{tool} 409: the key is in flight")
        if status == 422:
            return Sent("conflict", f"{tool} 422: the key holds another payload")
        if status >= 500:
            return Sent("failed", f"{tool} {status}")
        return Sent("refused", f"{tool} {status}: {str(body)[:200]}")

    def lookup(self, server: Server, *, key: str, token: int) -> Found:
        tool = LOOKUP_TOOL.get(server.kind)
        if tool is None:
            return Found("unqueryable", f"{server.name} offers no lookup tool")
        param = "idempotency_key" if server.kind == "idempotent" else "client_marker"
        try:
            answer = self._call(server, tool, {param: key}, token)
        except (NotSent, Unanswered, TimeoutError) as exc:
            return Found("unavailable", f"{tool}: no answer ({exc or type(exc).__name__})")
        status = int(answer.get("status") or 0)
        if status == 404 and server.kind == "idempotent":
            return Found("not_found", f"{tool} 404")
        if status != 200:
            return Found("unavailable", f"{tool} {status}")
        body = answer.get("body")
        return _by_key(body) if server.kind == "idempotent" else _by_marker(body)


def _name(exc: BaseException) -> str:
    """The exception behind a task group's ExceptionGroup, by name."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return type(exc).__name__
