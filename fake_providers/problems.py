"""RFC 9457 ``application/problem+json`` errors, the only error shape a provider sends."""

from __future__ import annotations

import json
from http import HTTPStatus

PROBLEM_TYPE = "application/problem+json"


class Problem(Exception):
    """Raised anywhere in request handling; the server turns it into a problem response."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        title: str | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.title = title or _phrase(status)
        #: Response headers the status calls for (``Allow`` on a 405, RFC 9110).
        self.headers = headers

    def body(self, *, instance: str | None = None) -> bytes:
        return problem_body(self.status, self.detail, title=self.title, instance=instance)


def problem_body(
    status: int, detail: str, *, title: str | None = None, instance: str | None = None
) -> bytes:
    doc: dict[str, object] = {
        "type": "about:blank",
        "title": title or _phrase(status),
        "status": status,
        "detail": detail,
    }
    if instance is not None:
        doc["instance"] = instance
    return json.dumps(doc, separators=(",", ":")).encode()


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"
