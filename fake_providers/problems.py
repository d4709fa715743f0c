"""RFC 9457 ``application/problem+json`` errors: the shape a provider's own API sends.

A persona (``fake_providers.personas``) sends the same errors in its vendor's envelope,
so each carries a ``code`` saying what went wrong, not only the status: a 422 for a
key reused with another payload and a 422 for a missing field are different errors
in every vendor's API.
"""

from __future__ import annotations

import json
from http import HTTPStatus

PROBLEM_TYPE = "application/problem+json"

#: What went wrong, for personas: each maps these onto its vendor's errors.
CODES = (
    "invalid_request",  # malformed or missing input (400, 415, 422)
    "missing_key",  # an idempotent write without its key (400)
    "key_in_flight",  # the same key is still being handled (409)
    "key_mismatch",  # the same key with another payload (422)
    "injected_failure",  # fail_before_commit or fail_lookup (a 5xx)
    "session_expired",  # an identity fault: 401
    "identity_changed",  # an identity fault: 403
    "not_found",  # no such route, object or key (404)
    "method_not_allowed",  # 405
    "no_lookup",  # an unqueryable provider asked to look up (501)
    "provider_bug",  # 500: never on purpose
)


class Problem(Exception):
    """Raised anywhere in request handling; the server turns it into a problem response."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        title: str | None = None,
        headers: tuple[tuple[str, str], ...] = (),
        code: str = "invalid_request",
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.title = title or _phrase(status)
        #: Response headers the status calls for (``Allow`` on a 405, RFC 9110).
        self.headers = headers
        #: One of :data:`CODES`: what a persona reads to pick the vendor's error.
        self.code = code

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
