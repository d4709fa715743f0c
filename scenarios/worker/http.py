"""The worker's HTTP client: one request on one fresh connection, errors sorted by
whether the request can have left.

Standard library only, and not even ``http.client``: httpx (and the SSL set-up its client
makes) was most of a worker's start-up, and http.client, with the email parser and ssl it
loads, was another 20 ms of CPU in every worker that made a call (every trial starts two
or three). The provider answers plain HTTP/1.1 with a Content-Length, which is all
:class:`Http11` needs to speak. A fresh connection per request
also makes the one distinction the protocol needs exact: a failure to connect means
nothing was sent; anything after the connection is up may have landed. (A pooled
connection the peer closed meanwhile blurs that line.) On loopback a connect costs
microseconds.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol
from urllib.parse import urlencode, urlsplit


class NotSent(Exception):
    """The connection could not be made: the request never left."""


class NoResponse(Exception):
    """The request may have been sent, and no whole answer came back."""


class BadResponse(Exception):
    """What came back is not a whole HTTP/1.1 answer."""


class RemoteDisconnected(ConnectionResetError, BadResponse):
    """The peer closed the connection before the status line."""


class IncompleteRead(BadResponse):
    """The body ended before its Content-Length."""


class BadStatusLine(BadResponse):
    """The first line is not ``HTTP/1.x NNN reason``."""


class Response(NamedTuple):
    status: int
    body: bytes
    #: Header names lower-cased (HTTP names are case-blind): read them with :meth:`header`.
    headers: Mapping[str, str] = MappingProxyType({})

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def is_success(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The body as JSON; ValueError when it is not."""
        return json.loads(self.body)


class Answer(Protocol):
    """What the client reads of an answer (the shape of :class:`http.client.HTTPResponse`)."""

    @property
    def status(self) -> int: ...

    def read(self) -> bytes: ...

    def getheaders(self) -> list[tuple[str, str]]: ...


class Connection(Protocol):
    """What the client needs of a connection (the shape of ``http.client.HTTPConnection``)."""

    def connect(self) -> None: ...

    def request(
        self, method: str, url: str, body: bytes | None = None, headers: Mapping[str, str] = ...
    ) -> None: ...

    def getresponse(self) -> Answer: ...

    def close(self) -> None: ...


#: ``(host, port, timeout_s) -> connection``; tests pass their own.
Connect = Callable[[str, int, float], Connection]


def _connection(host: str, port: int, timeout_s: float) -> Connection:
    return Http11(host, port, timeout_s)


#: An answer's status line and headers together stay under this (the stdlib's own cap
#: on a header line is 64 KiB; the provider's are a few hundred bytes).
MAX_HEAD_BYTES = 65_536


class Http11:
    """One HTTP/1.1 exchange on one connection: the request, then the answer read to its
    Content-Length (or to the peer's close). ``timeout_s`` bounds the connect and each
    read, like http.client's."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self._sock: socket.socket | None = None
        self._method = "GET"

    def connect(self) -> None:
        self._sock = socket.create_connection((self.host, self.port), self.timeout_s)

    def request(
        self, method: str, url: str, body: bytes | None = None, headers: Mapping[str, str] = {}
    ) -> None:
        assert self._sock is not None, "connect() first"
        self._method = method
        body = body or b""
        lines = [f"{method} {url} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body)}")
        self._sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    def getresponse(self) -> Answer:
        assert self._sock is not None, "connect() first"
        with self._sock.makefile("rb") as stream:
            return read_answer(stream, head=self._method == "HEAD")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class Reader(Protocol):
    def readline(self, limit: int = ..., /) -> bytes: ...

    def read(self, n: int = ..., /) -> bytes: ...


class ReadAnswer(NamedTuple):
    status: int
    body: bytes
    headers: list[tuple[str, str]]

    def read(self) -> bytes:
        return self.body

    def getheaders(self) -> list[tuple[str, str]]:
        return self.headers


def read_answer(stream: Reader, *, head: bool = False) -> ReadAnswer:
    """Read one answer off ``stream``: interim 1xx answers are skipped, the body is read
    to its Content-Length, or to the end when there is none (the request asked for
    ``Connection: close``). Errors are :class:`BadResponse` or the socket's own."""
    while True:
        status, headers = _read_head(stream)
        if not 100 <= status < 200:
            break
    if head or status in (204, 304):
        return ReadAnswer(status, b"", headers)
    fields = {k.lower(): v for k, v in headers}
    if "chunked" in fields.get("transfer-encoding", "").lower():
        return ReadAnswer(status, _read_chunked(stream), headers)
    length = fields.get("content-length")
    if length is None:
        return ReadAnswer(status, stream.read(), headers)
    try:
        n = int(length)
    except ValueError:
        raise BadResponse(f"Content-Length {length!r}") from None
    body = stream.read(n)
    if len(body) < n:
        raise IncompleteRead(f"{len(body)} of {n} bytes")
    return ReadAnswer(status, body, headers)


def _read_head(stream: Reader) -> tuple[int, list[tuple[str, str]]]:
    line = stream.readline(MAX_HEAD_BYTES)
    if not line:
        raise RemoteDisconnected("closed before the status line")
    parts = line.decode("latin-1").split(None, 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise BadStatusLine(repr(line[:80]))
    headers: list[tuple[str, str]] = []
    size = len(line)
    while True:
        line = stream.readline(MAX_HEAD_BYTES)
        size += len(line)
        if size > MAX_HEAD_BYTES:
            raise BadResponse("headers too long")
        if line in (b"\r\n", b"\n"):
            return int(parts[1]), headers
        if not line.endswith(b"\n"):
            raise IncompleteRead("closed inside the headers")
        name, sep, value = line.decode("latin-1").partition(":")
        if not sep:
            raise BadResponse(f"header line {line[:80]!r}")
        headers.append((name.strip(), value.strip()))


def _read_chunked(stream: Reader) -> bytes:
    chunks: list[bytes] = []
    while True:
        size_line = stream.readline(MAX_HEAD_BYTES)
        try:
            size = int(size_line.split(b";", 1)[0], 16)
        except ValueError:
            raise IncompleteRead(f"chunk size {size_line[:40]!r}") from None
        if size == 0:
            while stream.readline(MAX_HEAD_BYTES) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(chunks)
        chunk = stream.read(size)
        if len(chunk) < size or stream.readline(MAX_HEAD_BYTES) not in (b"\r\n", b"\n"):
            raise IncompleteRead("chunk cut short")
        chunks.append(chunk)


class Transport:
    """Sends one request and reads its whole answer; ``timeout_s`` bounds each step
    (the connect, and each read), as httpx's single timeout did."""

    def __init__(self, *, timeout_s: float, connect: Connect = _connection) -> None:
        self.timeout_s = timeout_s
        self._connect = connect

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None = None,
        params: Mapping[str, str] | None = None,
    ) -> Response:
        parts = urlsplit(url)
        target = parts.path or "/"
        if params:
            target += "?" + urlencode(params)
        conn = self._connect(parts.hostname or "127.0.0.1", parts.port or 80, self.timeout_s)
        try:
            try:
                conn.connect()
            except OSError as exc:
                raise NotSent(type(exc).__name__) from exc
            try:
                conn.request(method, target, body=body, headers={**headers, "Connection": "close"})
                answer = conn.getresponse()
                headers = {k.lower(): v for k, v in answer.getheaders()}
                return Response(answer.status, answer.read(), headers)
            except (OSError, BadResponse) as exc:
                raise NoResponse(type(exc).__name__) from exc
        finally:
            conn.close()
