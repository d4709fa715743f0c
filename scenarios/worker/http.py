"""The worker's HTTP client: one request on one fresh connection, errors sorted by
whether the request can have left.

Standard library only: httpx (and the SSL set-up its client makes) was most of a worker's
start-up, and every trial starts two or three workers. A fresh connection per request
also makes the one distinction the protocol needs exact: a failure to connect means
nothing was sent; anything after the connection is up may have landed. (A pooled
connection the peer closed meanwhile blurs that line.) On loopback a connect costs
microseconds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit


class NotSent(Exception):
    """The connection could not be made: the request never left."""


class NoResponse(Exception):
    """The request may have been sent, and no whole answer came back."""


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    #: Header names lower-cased (HTTP names are case-blind): read them with :meth:`header`.
    headers: Mapping[str, str] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def is_success(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The body as JSON; ValueError when it is not."""
        return json.loads(self.body)


class Answer(Protocol):
    """What the client reads of :class:`http.client.HTTPResponse`."""

    status: int

    def read(self) -> bytes: ...

    def getheaders(self) -> list[tuple[str, str]]: ...


class Connection(Protocol):
    """What the client needs of :class:`http.client.HTTPConnection`."""

    def connect(self) -> None: ...

    def request(
        self, method: str, url: str, body: bytes | None = None, headers: Mapping[str, str] = ...
    ) -> None: ...

    def getresponse(self) -> Answer: ...

    def close(self) -> None: ...


#: ``(host, port, timeout_s) -> connection``; tests pass their own.
Connect = Callable[[str, int, float], Connection]


def _connection(host: str, port: int, timeout_s: float) -> Connection:
    # Imported at the first call, not at start: http.client (with the email parser and
    # ssl it loads) is a fifth of a worker's imports, and a worker killed before its
    # first call never needs it.
    import http.client

    return http.client.HTTPConnection(host, port, timeout=timeout_s)


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
            except (OSError, _http_errors()) as exc:
                raise NoResponse(type(exc).__name__) from exc
        finally:
            conn.close()


def _http_errors() -> type[Exception]:
    """http.client's own errors, only once a request was made (see :func:`_connection`)."""
    import http.client

    return http.client.HTTPException
