"""The HTTP front of a provider: stdlib ``ThreadingHTTPServer``, one thread per connection.

Stdlib rather than an ASGI stack: it starts in a few milliseconds and gives direct hold
of the socket, which "commit, then drop the connection" needs (an RST, not a response).
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
import struct
import sys
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

from fake_providers.app import MAX_BODY_BYTES, ProviderApp, Reply, Request
from fake_providers.faults import FaultBoard
from fake_providers.peers import peer_pid
from fake_providers.problems import PROBLEM_TYPE, Problem
from fake_providers.store import Store


def is_loopback(host: str) -> bool:
    """IPv4 loopback only: the server socket is AF_INET and must never face a network."""
    if host == "localhost":
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    return addr.version == 4 and addr.is_loopback


class ProviderServer(ThreadingHTTPServer):
    daemon_threads = True
    # Restarting on the same port right after a SIGKILL must not fail on TIME_WAIT.
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], app: ProviderApp, *, peer_pids: bool) -> None:
        self.app = app
        self.peer_pids = peer_pids
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


class _Handler(BaseHTTPRequestHandler):
    server: ProviderServer
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections
    # Unparseable request lines would otherwise be answered HTTP/0.9 style, with no
    # status line at all; a client should always see a status and a problem body.
    default_request_version = "HTTP/1.0"
    # A client that sends half a request, or parks an idle keep-alive connection,
    # must not pin a thread forever. Holds wait on an event, not the socket, so this
    # never cuts a hold short.
    timeout = 300.0
    _drop = False
    _peer_pid: int | None = None
    _peer_known = False

    def log_message(self, format: str, *args: Any) -> None:
        # The effect log is the record; per-request stderr lines would only slow it down.
        pass

    def setup(self) -> None:
        super().setup()
        # Headers and body go out as two writes; without NODELAY, Nagle plus the
        # client's delayed ACK adds ~40 ms to every response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _serve(self) -> None:
        try:
            req = self._read()
        except Problem as p:
            self.close_connection = True
            self._send(Reply.problem(p, instance=self.path))
            return
        reply = self.server.app.handle(req)
        if reply.drop:
            self._drop = True
            self.close_connection = True
            return
        try:
            self._send(reply)
        except OSError:
            # The client is gone (often killed on purpose while held); the work is done.
            self.close_connection = True

    def __getattr__(self, name: str) -> Any:
        # The stdlib answers a method without a do_<METHOD> with a 501, a server error
        # for a client's mistake; every method token reaches the app instead, which
        # answers 405 with the Allow header the route calls for.
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)

    def _read(self) -> Request:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raise Problem(411, "chunked bodies are not supported; send Content-Length")
        raw = self.headers.get("Content-Length", "0")
        try:
            length = int(raw)
        except ValueError:
            raise Problem(400, f"Content-Length {raw!r} is not an integer") from None
        if length < 0:
            raise Problem(400, f"Content-Length {length} is negative")
        if length > MAX_BODY_BYTES:
            raise Problem(413, f"body of {length} bytes exceeds {MAX_BODY_BYTES}; send less")
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        if (
            self.server.peer_pids
            and not self._peer_known
            and self.server.app.wants_peer_pid(urlsplit(self.path).path, headers)
        ):
            # One lookup per connection: a keep-alive connection keeps its process.
            self._peer_pid = peer_pid(self.client_address, self.connection.getsockname())
            self._peer_known = True
        return Request(
            method=self.command,
            target=self.path,
            headers=headers,
            body=body,
            peer_pid=self._peer_pid,
        )

    def _send(self, reply: Reply) -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        for name, value in reply.headers:
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # Malformed request lines land here; answer them as problem+json like the rest.
        self.close_connection = True
        body = Problem(code, explain or message or "malformed request").body()
        self.send_response(code, message)
        self.send_header("Content-Type", PROBLEM_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and code >= 200:
            self.wfile.write(body)

    def finish(self) -> None:
        if not self._drop:
            super().finish()
            return
        # An RST, not a FIN: the client sees its request vanish after the commit.
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.rfile.close()
            self.connection.close()
        except OSError:
            pass


def build(
    *,
    kind: str,
    name: str,
    state_path: Path | str,
    key_ttl_s: float,
    host: str,
    port: int,
    peer_pids: bool = True,
    hold_max_s: float = 300.0,
    secret: str | None = None,
    transport: str = "http",
    tool_hints: Mapping[str, bool] | None = None,
) -> ProviderServer:
    if not is_loopback(host):
        raise ValueError(f"host={host!r} is not loopback; providers bind 127.0.0.1 only")
    store = Store(state_path, provider=name, key_ttl_s=key_ttl_s)
    app = ProviderApp(
        kind=kind,
        name=name,
        store=store,
        board=FaultBoard(hold_max_s=hold_max_s),
        secret=secret,
        transport=transport,
        tool_hints=tool_hints,
        server=(host, port),
    )
    return ProviderServer((host, port), app, peer_pids=peer_pids)


def serve_forever(
    server: ProviderServer,
    *,
    exit_on_stdin_eof: bool = False,
    announce: dict[str, Any] | None = None,
) -> None:
    """Serve until SIGTERM or SIGINT (or stdin's EOF), then release every hold and stop.

    ``announce`` adds fields to the ready line (a secret the provider made itself).
    """
    stop = threading.Event()
    if exit_on_stdin_eof:
        # The launcher holds the other end of this pipe; the kernel closes it when the
        # launcher dies, even by SIGKILL, so an orphaned provider stops by itself.
        threading.Thread(
            target=_stop_at_eof, args=(stop,), name="provider-parent", daemon=True
        ).start()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # A short poll interval makes shutdown (and so stop()) take ~50 ms instead of ~500 ms.
    loop = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="provider-accept", daemon=True
    )
    loop.start()
    endpoint = server.app.mcp
    if endpoint is not None and not endpoint.wait_loaded():
        # Never ready with a tool server that cannot answer: say why, and exit.
        sys.stderr.write(f"the MCP endpoint did not load: {endpoint.error or 'timed out'}\n")
        sys.stderr.flush()
        server.shutdown()
        server.server_close()
        sys.exit(1)
    ready = {"ready": True, "url": server.url, "pid": os.getpid(), **(announce or {})}
    sys.stdout.write(json.dumps(ready) + "\n")
    sys.stdout.flush()
    stop.wait()
    # Held threads wake and finish as drops, so nothing waits on a hold at exit.
    server.app.board.close()
    server.shutdown()
    server.server_close()
    server.app.close()


def _stop_at_eof(stop: threading.Event) -> None:
    # The raw fd, not sys.stdin: a daemon thread blocked inside the buffered reader
    # holds its lock, and interpreter shutdown then aborts ("_enter_buffered_busy").
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    stop.set()
