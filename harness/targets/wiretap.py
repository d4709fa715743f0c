"""A recording pass-through in front of one provider, for ``check-config`` only.

A provider records the writes and lookups it serves, never a request for a path it
does not serve (a worker's SDK calling ``/v1/charges`` at the Stripe persona gets a
Stripe 404 and nothing is recorded): the one mistake a worker pointed at a persona
most often makes would leave no trace. The tap sees every request, so check-config can
name it. Trials never use it: it buffers whole answers, which a held request or a
dropped connection must not be.
"""

from __future__ import annotations

import contextlib
import http.client
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import urlsplit

#: Headers that belong to one connection, never forwarded.
_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host"}
)
_UPSTREAM_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Tapped:
    """One request the worker sent, and the status it got (None: no answer)."""

    method: str
    path: str
    status: int | None


class WireTap:
    """Forwards ``url`` + path to the provider at ``upstream``, recording each request."""

    def __init__(self, upstream: str) -> None:
        target = urlsplit(upstream)
        self.seen: list[Tapped] = []
        lock = threading.Lock()
        host, port = target.hostname or "127.0.0.1", target.port or 80
        seen = self.seen

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                del format, args  # the list is the record

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                status: int | None = None
                try:
                    conn = http.client.HTTPConnection(host, port, timeout=_UPSTREAM_TIMEOUT_S)
                    try:
                        conn.request(self.command, self.path, body=body, headers=headers)
                        reply = conn.getresponse()
                        data = reply.read()
                        status = reply.status
                        kept = [(k, v) for k, v in reply.getheaders() if k.lower() not in _HOP]
                    finally:
                        conn.close()
                finally:
                    with lock:
                        seen.append(Tapped(self.command, self.path.split("?", 1)[0], status))
                self.send_response_only(status)
                for k, v in kept:
                    if k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> WireTap:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
