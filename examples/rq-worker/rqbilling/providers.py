"""Provider calls over HTTP (standard library), classified the way the protocol needs.

A write ends ``ok``, ``failed`` (a 5xx, or the connection never opened: nothing can have
been committed), ``unknown`` (a timeout or broken connection after the request left, or
409: the same key is still in flight), ``conflict`` (422: the key holds another payload)
or ``refused`` (any other 4xx). A lookup ends ``confirmed``, ``not_found``, ``conflict``
(a plain provider holding several effects under one marker), ``in_flight``,
``unavailable`` (no answer, or an error) or ``unqueryable`` (the provider cannot be asked).
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from rqbilling.settings import Provider


@dataclass(frozen=True)
class Sent:
    kind: str
    detail: str
    ref: str | None = None


@dataclass(frozen=True)
class Found:
    outcome: str
    detail: str
    ref: str | None = None


class NotSent(Exception):
    """The connection could not be opened: the request never left."""


def _exchange(
    method: str, url: str, headers: dict[str, str], body: bytes | None, timeout_s: float
) -> tuple[int, bytes]:
    """One request on a fresh connection. NotSent before the request left; any other
    OSError or HTTPException after (the outcome is then unknown)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout_s)
    try:
        try:
            conn.connect()
        except OSError as exc:
            raise NotSent(type(exc).__name__) from None
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.request(method, target, body=body, headers=headers)
        res = conn.getresponse()
        return res.status, res.read()
    finally:
        conn.close()


def _id(doc: Any) -> str | None:
    if isinstance(doc, dict) and doc.get("id") is not None:
        return str(doc["id"])
    return None


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def answered(status: int, data: bytes, ref: str | None) -> Sent:
    """A write that was answered, by its status: all the worker needs to go on."""
    if 200 <= status < 300:
        return Sent("ok", f"http {status}", ref)
    if status == 409:
        return Sent("unknown", "http 409: the key is in flight")
    if status == 422:
        return Sent("conflict", "http 422: the key holds another payload")
    if status >= 500:
        return Sent("failed", f"http {status}")
    return Sent("refused", f"http {status}: {data[:200].decode(errors='replace')}")


class Caller:
    """What every client of this worker sends besides its request: the worker's id and
    the fencing token of its claim, and the timeout of one request."""

    def __init__(self, *, worker_id: str, timeout_s: float) -> None:
        self.worker_id = worker_id
        self.timeout_s = timeout_s

    def _headers(self, token: int) -> dict[str, str]:
        return {"X-Worker-Id": self.worker_id, "X-Fencing-Token": str(token)}


class Calls(Caller):
    def write(self, p: Provider, body: dict[str, Any], *, key: str, token: int) -> Sent:
        headers = {**self._headers(token), "Content-Type": "application/json"}
        if p.kind == "idempotent":
            url, payload = f"{p.url}/v1/effects", body
            headers["Idempotency-Key"] = key
        else:
            # A plain provider has no key; the marker is how a lookup finds the send again.
            url, payload = f"{p.url}/v1/sends", {**body, "client_marker": key}
        try:
            data_out = json.dumps(payload).encode()
            status, data = _exchange("POST", url, headers, data_out, self.timeout_s)
        except NotSent as exc:
            return Sent("failed", f"not sent ({exc})")
        except (OSError, http.client.HTTPException) as exc:
            return Sent("unknown", f"no answer ({type(exc).__name__})")
        return answered(status, data, _id(_json(data)))

    def lookup(self, p: Provider, *, job_id: str, key: str, token: int) -> Found:
        if p.kind == "unqueryable":
            return Found("unqueryable", "the provider has no lookup")
        if p.kind == "idempotent":
            url = f"{p.url}/v1/effects?{urlencode({'idempotency_key': key, 'job_id': job_id})}"
        else:
            url = f"{p.url}/v1/sends?{urlencode({'client_marker': key, 'job_id': job_id})}"
        try:
            status, data = _exchange("GET", url, self._headers(token), None, self.timeout_s)
        except (NotSent, OSError, http.client.HTTPException) as exc:
            return Found("unavailable", f"no answer ({type(exc).__name__})")
        if status == 501:
            return Found("unqueryable", "http 501")
        if status == 404 and p.kind == "idempotent":
            return Found("not_found", "http 404")
        doc = _json(data)
        if status != 200 or doc is None:
            return Found("unavailable", f"http {status}")
        if p.kind == "idempotent":
            return _by_key(doc)
        return _by_marker(doc)


def _by_key(doc: Any) -> Found:
    state = doc.get("state") if isinstance(doc, dict) else None
    if state == "in_flight":
        return Found("in_flight", "the key is in flight")
    if state != "completed":
        return Found("unavailable", f"state {state!r}")
    response = doc.get("response") or {}
    status = int(response.get("status") or 0)
    if 200 <= status < 300:
        return Found("confirmed", "completed", _id(response.get("body")))
    # An error stored under our key: nothing a retry could square with.
    return Found("conflict", f"completed with http {status}")


def _by_marker(doc: Any) -> Found:
    if not isinstance(doc, list):
        return Found("unavailable", "not a list")
    if not doc:
        return Found("not_found", "no send with this marker")
    if len(doc) == 1:
        return Found("confirmed", "one send with this marker", _id(doc[0]))
    return Found("conflict", f"{len(doc)} sends with one marker")
