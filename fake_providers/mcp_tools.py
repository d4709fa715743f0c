"""The MCP endpoint of a provider: its tools, served with the official ``mcp`` SDK.

Every tool call becomes the provider's own write or lookup (``ProviderApp.tool_write``,
``tool_lookup``) on the same store and fault board as the HTTP API, so arrivals,
effects, faults and holds are exactly the HTTP kind's: a held ``create_ticket`` is a
held keyed write, a ``drop_after_commit`` resets the MCP client's connection after the
commit. A tool answers what the HTTP route would have, as structured content
(``status``, ``replayed``, ``body``), an error status as an ``isError`` result.

The SDK takes most of a second to import; it loads in a thread while the server binds
and starts, and the provider says it is ready only once the endpoint is (a first tool
call that waited for the import would be latency nobody injected).
"""

from __future__ import annotations

import importlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fake_providers.fingerprint import MARKER_FIELD
from fake_providers.mcp_bridge import EXCHANGE_KEY, AsgiBridge, Exchange
from fake_providers.messages import JSON_TYPE, Reply, Request
from fake_providers.problems import Problem
from fake_providers.tools import MCP_PATH, ToolSpec

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context
    from mcp_types import CallToolResult

#: How long a first request waits for the SDK to load before it is refused (503).
LOAD_TIMEOUT_S = 30.0
#: What :func:`_build` imports of the SDK: a fork server that imports these before it
#: forks an MCP provider spares each one the SDK's import (``load_sdk``).
SDK_MODULES = ("mcp.server.mcpserver", "mcp.server.transport_security", "mcp_types")
#: Request headers a tool call passes on to the write it makes (the rest are MCP's).
_PASSED_HEADERS = ("x-fencing-token", "x-worker-id")

Write = Callable[[Request, str], Reply]
Lookup = Callable[[Request, str, dict[str, list[str]]], Reply]


class McpEndpoint:
    """``/mcp`` on one provider: loads the SDK in the background, then bridges to it."""

    def __init__(
        self,
        *,
        name: str,
        tools: Sequence[ToolSpec],
        write: Write,
        lookup: Lookup,
        server: tuple[str, int] = ("127.0.0.1", 0),
    ) -> None:
        self.name = name
        self.tools = tuple(tools)
        self._write = write
        self._lookup = lookup
        self._server = server
        self._bridge: AsgiBridge | None = None
        self._error: str | None = None
        self._loaded = threading.Event()
        threading.Thread(target=self._load, name="provider-mcp-load", daemon=True).start()

    def _load(self) -> None:
        try:
            self._bridge = _build(self)
        except Exception as exc:  # a provider bug or a broken install: said on each call
            self._error = f"{type(exc).__name__}: {exc}"
        finally:
            self._loaded.set()

    @property
    def error(self) -> str | None:
        """Why the endpoint could not be loaded, once it failed."""
        return self._error

    def wait_loaded(self, timeout_s: float = LOAD_TIMEOUT_S) -> bool:
        return self._loaded.wait(timeout_s) and self._bridge is not None

    def handle(self, req: Request, query: bytes) -> Reply:
        if not self.wait_loaded():
            why = self._error or f"not loaded within {LOAD_TIMEOUT_S:g} s"
            raise Problem(503, f"the MCP endpoint is unavailable ({why})")
        assert self._bridge is not None
        return self._bridge.call(req, path=MCP_PATH, query=query)

    def close(self) -> None:
        if self._loaded.is_set() and self._bridge is not None:
            self._bridge.close()

    # -- one tool call ----------------------------------------------------------------

    def call_write(self, exchange: Exchange, spec: ToolSpec, doc: object, key: str | None) -> Reply:
        headers = _passed(exchange.request.headers)
        if key is not None:
            headers["idempotency-key"] = key
        # The document goes on byte for byte as the HTTP write's body would: the same
        # fingerprint, the same job_id and client_marker readings.
        body = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
        req = Request("POST", spec.path, headers, body, exchange.request.peer_pid)
        return self._write(req, spec.path)

    def call_lookup(self, exchange: Exchange, spec: ToolSpec, param: str, value: str) -> Reply:
        headers = _passed(exchange.request.headers)
        req = Request("GET", spec.path, headers, b"", exchange.request.peer_pid)
        return self._lookup(req, spec.path, {param: [value]})


def _passed(headers: Mapping[str, str]) -> dict[str, str]:
    out = {k: headers[k] for k in _PASSED_HEADERS if k in headers}
    out["content-type"] = JSON_TYPE
    return out


def _exchange(ctx: Context) -> Exchange:
    request = ctx.request_context.request
    exchange = getattr(request, "scope", {}).get(EXCHANGE_KEY)
    if not isinstance(exchange, Exchange):
        raise RuntimeError("a tool call reached the MCP server outside the provider's bridge")
    return exchange


def _result(exchange: Exchange, reply: Reply) -> CallToolResult:
    """What the HTTP route answered, as a tool result (or a dropped connection)."""
    from mcp_types import CallToolResult, TextContent

    if reply.drop:
        exchange.drop = True
    try:
        body = json.loads(reply.body) if reply.body else None
    except ValueError:
        body = reply.body.decode("utf-8", "replace")
    replayed = any(h == ("Idempotent-Replayed", "true") for h in reply.headers)
    doc = {"status": reply.status, "replayed": replayed, "body": body}
    text = json.dumps(doc, separators=(",", ":"))
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=doc,
        is_error=reply.status >= 400 or reply.drop,
    )


def load_sdk() -> None:
    """Import the SDK's modules the endpoint uses (most of a second of CPU)."""
    for module in SDK_MODULES:
        importlib.import_module(module)


def _build(endpoint: McpEndpoint) -> AsgiBridge:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.transport_security import TransportSecuritySettings
    from mcp_types import CallToolResult, ToolAnnotations

    server: MCPServer[Any] = MCPServer(
        name=endpoint.name,
        instructions="A crashpoint fake provider: every tool call is recorded as evidence.",
        log_level="WARNING",
    )
    for spec in endpoint.tools:
        fn = _tool_function(endpoint, spec, Context, CallToolResult)
        server.add_tool(
            fn,
            name=spec.name,
            description=spec.description,
            annotations=ToolAnnotations.model_validate(dict(spec.annotations)),
            structured_output=False,
        )
    # Loopback only, behind the provider's own host check; the worker may reach it
    # through a proxy on another port, which the default rebinding guard allows too.
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*"],
    )
    server.streamable_http_app(json_response=True, stateless_http=True, transport_security=security)
    manager = server.session_manager
    return AsgiBridge(manager.handle_request, manager.run(), server=endpoint._server)


def _tool_function(
    endpoint: McpEndpoint, spec: ToolSpec, context: type[Any], result: type[Any]
) -> Callable[..., Any]:
    """A plain function the SDK reads the tool's input schema from (its signature)."""
    if spec.role == "lookup" and spec.name == "get_ticket":

        def get_ticket(idempotency_key: str, ctx: Context) -> CallToolResult:
            ex = _exchange(ctx)
            return _result(ex, endpoint.call_lookup(ex, spec, "idempotency_key", idempotency_key))

        fn: Callable[..., Any] = get_ticket
    elif spec.role == "lookup":

        def find_messages(client_marker: str, ctx: Context) -> CallToolResult:
            ex = _exchange(ctx)
            return _result(ex, endpoint.call_lookup(ex, spec, MARKER_FIELD, client_marker))

        fn = find_messages
    elif spec.name == "create_ticket":

        def create_ticket(
            ticket: dict[str, Any], idempotency_key: str, ctx: Context
        ) -> CallToolResult:
            ex = _exchange(ctx)
            return _result(ex, endpoint.call_write(ex, spec, ticket, idempotency_key))

        fn = create_ticket
    else:

        def send_message(message: dict[str, Any], ctx: Context) -> CallToolResult:
            ex = _exchange(ctx)
            return _result(ex, endpoint.call_write(ex, spec, message, None))

        fn = send_message
    # The SDK resolves the signature's names from the function's globals.
    fn.__annotations__.update(ctx=context, **{"return": result})
    return fn


__all__ = ["LOAD_TIMEOUT_S", "SDK_MODULES", "McpEndpoint", "load_sdk"]
