"""The worker's two kinds of provider calls, classified the way the protocol needs.

A write ends ``ok``, ``failed`` (the provider cleanly refused, or the request never left:
nothing can have happened), ``unknown`` (timeout, reset, dropped response, 409 in flight:
something may have happened) or ``conflict`` (422: the key already holds another payload).
A lookup ends in one of the seeds' reconcile results, plus ``unqueryable`` (501).
Either ends ``unverified`` when the provider refused the job's identity (401: the session
expired; 403: the profile now holds another identity, named in ``identity_now``):
nothing happened, and nothing may be done under that identity until a human looks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from scenarios.worker.config import ProviderSpec
from scenarios.worker.http import NoResponse, NotSent, Response, Transport

#: The header naming the identity a request acts under (see fake_providers.identity).
IDENTITY_HEADER = "X-Crashpoint-Identity"
#: What a provider answers a request under an identity it no longer accepts.
IDENTITY_REFUSED = (401, 403)


class WriteResult(NamedTuple):
    kind: str  # ok | failed | unknown | conflict | unverified
    reason: str
    ref: str | None = None
    #: For ``unverified`` after a 403: the identity the profile holds now.
    identity_now: str | None = None


class Lookup(NamedTuple):
    outcome: str  # confirmed | not_found | conflict | unavailable | unqueryable | unverified
    reason: str
    ref: str | None = None
    identity_now: str | None = None


class ProviderCalls:
    def __init__(
        self, *, timeout_s: float, worker_id: str, transport: Transport | None = None
    ) -> None:
        self._http = transport or Transport(timeout_s=timeout_s)
        self._worker_id = worker_id

    def close(self) -> None:
        """Nothing to release: every request has its own connection."""

    def _headers(self, token: int | None, identity: str | None = None) -> dict[str, str]:
        # A relay holds no lease, so it sends no token (a made-up one would look stale).
        headers = {"X-Worker-Id": self._worker_id}
        if token is not None:
            headers["X-Fencing-Token"] = str(token)
        if identity is not None:
            headers[IDENTITY_HEADER] = identity
        return headers

    def write(
        self,
        spec: ProviderSpec,
        body: Mapping[str, Any],
        *,
        key: str,
        marker: str | None,
        token: int | None,
        identity: str | None = None,
    ) -> WriteResult:
        headers = {**self._headers(token, identity), "Content-Type": "application/json"}
        if spec.kind == "idempotent":
            url = f"{spec.url}/v1/effects"
            headers["Idempotency-Key"] = key
            payload = dict(body)
        else:
            url = f"{spec.url}/v1/sends"
            payload = {**body, "client_marker": marker}
        try:
            r = self._http.send("POST", url, headers=headers, body=json.dumps(payload).encode())
        except NotSent as exc:
            return WriteResult("failed", f"not_sent:{exc}")
        except NoResponse as exc:
            return WriteResult("unknown", f"no_response:{exc}")
        if r.is_success:
            return WriteResult("ok", f"http_{r.status}", _ref(r))
        if r.status in IDENTITY_REFUSED:
            now = r.header(IDENTITY_HEADER)
            return WriteResult("unverified", f"http_{r.status}", identity_now=now)
        if r.status == 409:
            return WriteResult("unknown", "http_409")
        if r.status == 422:
            return WriteResult("conflict", "http_422")
        return WriteResult("failed", f"http_{r.status}")

    def lookup(
        self,
        spec: ProviderSpec,
        *,
        job_id: str,
        key: str,
        marker: str,
        token: int,
        identity: str | None = None,
    ) -> Lookup:
        if spec.kind == "idempotent":
            url = f"{spec.url}/v1/effects"
            params = {"idempotency_key": key, "job_id": job_id}
        else:
            url = f"{spec.url}/v1/sends"
            params = {"client_marker": marker, "job_id": job_id}
        try:
            r = self._http.send("GET", url, params=params, headers=self._headers(token, identity))
        except (NotSent, NoResponse) as exc:
            return Lookup("unavailable", f"no_response:{exc}")
        if r.status in IDENTITY_REFUSED:
            now = r.header(IDENTITY_HEADER)
            return Lookup("unverified", f"http_{r.status}", identity_now=now)
        if r.status == 501:
            return Lookup("unqueryable", "http_501")
        if r.status == 404 and spec.kind == "idempotent":
            return Lookup("not_found", "http_404")
        if r.status != 200:
            return Lookup("unavailable", f"http_{r.status}")
        try:
            doc = r.json()
        except ValueError:
            return Lookup("unavailable", "bad_json")
        return _idempotent(doc) if spec.kind == "idempotent" else _plain(doc)


def _idempotent(doc: Any) -> Lookup:
    state = doc.get("state") if isinstance(doc, dict) else None
    if state == "in_flight":
        # The provider is still executing an earlier write under this key: not knowable yet.
        return Lookup("unavailable", "in_flight")
    if state != "completed":
        return Lookup("unavailable", f"state_{state}")
    response = doc.get("response") or {}
    status = response.get("status", 0)
    if 200 <= status < 300:
        body = response.get("body") or {}
        return Lookup("confirmed", "completed", _id(body))
    # The provider stored an error under our key: evidence we cannot square with a retry.
    return Lookup("conflict", f"completed_http_{status}")


def _plain(doc: Any) -> Lookup:
    if not isinstance(doc, list):
        return Lookup("unavailable", "bad_json")
    if not doc:
        return Lookup("not_found", "no_match")
    if len(doc) == 1:
        return Lookup("confirmed", "one_match", _id(doc[0]))
    return Lookup("conflict", f"{len(doc)}_matches")


def _ref(r: Response) -> str | None:
    try:
        return _id(r.json())
    except ValueError:
        return None


def _id(doc: Any) -> str | None:
    """The provider's record id of the effect: the reference the ledger keeps, so the
    run, the job, its key and the provider's record can be tied together."""
    if not isinstance(doc, dict):
        return None
    for name in ("external_id", "id"):
        if doc.get(name) is not None:
            return str(doc[name])
    return None
