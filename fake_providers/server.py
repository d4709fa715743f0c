"""The HTTP front of a provider: stdlib ``ThreadingHTTPServer``, one thread per connection.

Stdlib rather than an ASGI stack: it starts in a few milliseconds and gives direct hold
of the socket, which "commit, then drop the connection" needs (an RST, not a response).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import select
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
from fake_providers.epochs import Epochs
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
    #: How long a wipe waits for the requests of before it to end; then it fails.
    WIPE_WAIT_S = 5.0

    def __init__(
        self,
        address: tuple[str, int],
        app: ProviderApp,
        *,
        peer_pids: bool,
        new_port_on_wipe: bool = False,
    ) -> None:
        self.app = app
        self.peer_pids = peer_pids
        #: A wipe also moves to a new port: whatever knew the old one (a worker that
        #: escaped its trial) finds it closed, as it would a stopped provider.
        self.new_port_on_wipe = new_port_on_wipe
        self.epochs = Epochs()
        #: Held while the listening socket is read or replaced, and while a connection is
        #: accepted and stamped, so a wipe never falls between the two.
        self._listen_lock = threading.Lock()
        #: Listening sockets a wipe replaced; the accept loop closes them.
        self._retired: list[socket.socket] = []
        self._stopping = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        super().__init__(address, _Handler)
        self.socket.setblocking(False)
        app.control.fence = self

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- accepting ----------------------------------------------------------------------

    def accept_forever(self) -> None:
        """Accept until :meth:`stop_accepting`; the listening socket may change under it
        (a wipe onto a new port), so each round selects on the current one."""
        while not self._stopping.is_set():
            with self._listen_lock:
                listener = self.socket
                for old in self._retired:
                    # Queued connections nobody accepted are reset: they are of before.
                    old.close()
                self._retired.clear()
            try:
                ready, _, _ = select.select([listener, self._wake_r], [], [], 0.5)
            except (OSError, ValueError):
                continue
            if self._wake_r in ready:
                with contextlib.suppress(OSError):
                    self._wake_r.recv(64)
            if listener in ready:
                self._accept(listener)

    def _accept(self, listener: socket.socket) -> None:
        with self._listen_lock:
            if listener is not self.socket:
                return
            try:
                conn, addr = listener.accept()
            except OSError:
                return
            self.epochs.opened(conn)
        try:
            self.process_request(conn, addr)
        except Exception:
            self.handle_error(conn, addr)
            self.shutdown_request(conn)

    def stop_accepting(self) -> None:
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def shutdown_request(self, request: Any) -> None:
        self.epochs.closed(request)
        super().shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        for s in (*self._retired, self._wake_r, self._wake_w):
            s.close()

    # -- the fence a wipe raises (see fake_providers.epochs) ----------------------------

    def begin(self) -> int:
        """A new epoch: every connection of before is shut, and with ``new_port_on_wipe``
        the provider listens on a fresh port. Returns how many connections were shut."""
        fresh = self._listener() if self.new_port_on_wipe else None

        def swap() -> None:
            if fresh is not None:
                self._retired.append(self.socket)
                self.socket = fresh
                self.server_address = fresh.getsockname()

        with self._listen_lock:
            stale = self.epochs.advance(during=swap)
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        for conn in stale:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        return len(stale)

    def wait(self) -> bool:
        """Wait (bounded) until no request of an older epoch is still being handled."""
        return self.epochs.wait_idle(self.WIPE_WAIT_S)

    def _listener(self) -> socket.socket:
        host = self.server_address[0]
        s = socket.socket(self.address_family, self.socket_type)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, 0))
            s.listen(self.request_queue_size)
            s.setblocking(False)
        except OSError:
            s.close()
            raise
        return s


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
    _epoch = 0
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
        self._epoch = self.server.epochs.epoch_of(self.connection)

    def _serve(self) -> None:
        try:
            req = self._read()
        except Problem as p:
            self.close_connection = True
            self._send(Reply.problem(p, instance=self.path))
            return
        if not self.server.epochs.enter(self.connection, self._epoch):
            # Accepted before a wipe: the request belongs to a trial that is over, and
            # must not reach the store the next one reads. Dropped, as a dead server would.
            self._drop = True
            self.close_connection = True
            return
        try:
            self._answer(req)
        finally:
            self.server.epochs.leave()

    def _answer(self, req: Request) -> None:
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
    new_port_on_wipe: bool = False,
    routes: Mapping[str, Any] | None = None,
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
        routes=routes,
    )
    server = ProviderServer(
        (host, port), app, peer_pids=peer_pids, new_port_on_wipe=new_port_on_wipe
    )
    if app.persona is not None and app.persona.name == "smtp":
        # Mail on a port of its own; control, oracle and store stay this server's.
        from fake_providers.smtp import attach

        try:
            attach(app, host=host, peer_pids=peer_pids, new_port_on_wipe=new_port_on_wipe)
        except BaseException:
            server.server_close()
            raise
    return server


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
    loop = threading.Thread(target=server.accept_forever, name="provider-accept", daemon=True)
    loop.start()
    endpoint = server.app.mcp
    if endpoint is not None and not endpoint.wait_loaded():
        # Never ready with a tool server that cannot answer: say why, and exit.
        sys.stderr.write(f"the MCP endpoint did not load: {endpoint.error or 'timed out'}\n")
        sys.stderr.flush()
        server.stop_accepting()
        loop.join()
        server.server_close()
        sys.exit(1)
    ready: dict[str, Any] = {"ready": True, "url": server.url, "pid": os.getpid()}
    if server.app.listeners:
        ready["listeners"] = server.app.control.addresses()
    ready |= announce or {}
    sys.stdout.write(json.dumps(ready) + "\n")
    sys.stdout.flush()
    stop.wait()
    # Held threads wake and finish as drops, so nothing waits on a hold at exit.
    server.app.board.close()
    # The wake-up ends the accept loop at once: stop() takes milliseconds, not a poll.
    server.stop_accepting()
    loop.join()
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
