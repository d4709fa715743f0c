"""Run an ASGI app (the MCP SDK's streamable HTTP endpoint) behind the stdlib server.

The provider's HTTP front stays the stdlib server (it owns the socket, which "commit,
then drop the connection" needs); a request for ``/mcp`` is handed to the ASGI app on
one asyncio loop in a thread of its own, and the handler thread waits for the answer.
The app answers JSON (no event stream), so one request is one complete reply. Each
request carries an :class:`Exchange` in its ASGI scope: a tool that must drop the
connection marks it there, and the bridge then sends nothing, whatever the app wrote.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from fake_providers.messages import DROP, Reply, Request

#: Where a request's :class:`Exchange` lives in its ASGI scope.
EXCHANGE_KEY = "crashpoint.exchange"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[
    [Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
    Awaitable[None],
]


@dataclass
class Exchange:
    """One HTTP request as the provider saw it, and whether its connection must drop."""

    request: Request
    drop: bool = False


@dataclass
class _Answer:
    status: int = 500
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytearray = field(default_factory=bytearray)


class AsgiBridge:
    """An ASGI app served from a loop thread; :meth:`call` runs one request on it.

    ``lifespan`` is entered on the loop before the first request (the MCP session
    manager's task group) and left by :meth:`close`.
    """

    def __init__(
        self,
        app: ASGIApp,
        lifespan: AbstractAsyncContextManager[Any],
        *,
        server: tuple[str, int],
    ) -> None:
        self._app = app
        self._lifespan = lifespan
        self._server = server
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="provider-mcp", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._failed is not None:
            raise RuntimeError(f"the MCP endpoint did not start: {self._failed}") from self._failed

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        try:
            async with self._lifespan:
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:  # reported to the constructor, which raises it
            self._failed = exc
            self._ready.set()

    def call(self, req: Request, *, path: str, query: bytes) -> Reply:
        """Run ``req`` through the app; blocks the calling (handler) thread until done."""
        exchange = Exchange(req)
        future = asyncio.run_coroutine_threadsafe(self._serve(exchange, path, query), self._loop)
        answer = future.result()
        if exchange.drop:
            return DROP
        ctype = "application/json"
        extra: list[tuple[str, str]] = []
        for name, value in answer.headers:
            if name == "content-type":
                ctype = value
            elif name not in ("content-length", "connection", "transfer-encoding"):
                extra.append((name, value))
        return Reply(answer.status, bytes(answer.body), ctype, tuple(extra))

    async def _serve(self, exchange: Exchange, path: str, query: bytes) -> _Answer:
        req = exchange.request
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": req.method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query,
            "root_path": "",
            "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in req.headers.items()],
            "client": ("127.0.0.1", 0),
            "server": self._server,
            "state": {},
            EXCHANGE_KEY: exchange,
        }
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": req.body, "more_body": False}
            # Nothing more will come; the request ends when the app has answered.
            await asyncio.Event().wait()
            return {"type": "http.disconnect"}

        answer = _Answer()

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer.status = int(message["status"])
                answer.headers = [
                    (bytes(k).decode("latin-1").lower(), bytes(v).decode("latin-1"))
                    for k, v in message.get("headers", [])
                ]
            elif message["type"] == "http.response.body":
                answer.body += message.get("body", b"")

        await self._app(scope, receive, send)
        return answer

    def close(self) -> None:
        if self._stop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=5.0)


__all__ = ["EXCHANGE_KEY", "AsgiBridge", "Exchange"]
