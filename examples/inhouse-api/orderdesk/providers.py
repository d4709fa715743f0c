"""The orders service's client: the team's own REST API, over plain ``urllib``.

``POST /orders`` creates an order; the service dedupes on ``meta.request_id`` (the
same id again answers the first order), and the job that asked rides in ``meta.job_id``.
``GET /orders?external_ref=ID`` finds the order created under a request id (404: none).

A create ends ``ok``, ``failed`` (a 5xx, or the connection never opened: nothing can
have been created), ``unknown`` (a timeout or broken connection after the request left,
or 409: the same request id is still being handled), ``conflict`` (422: the request id
was used with another order) or ``refused`` (any other 4xx). A lookup ends
``confirmed``, ``not_found``, or ``unavailable`` (no answer, or an error).
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlencode

# What the RQ worker's calls answer it with (examples/rq-worker/rqbilling/client.py), and
# what they send besides the request: the worker's id and its fencing token.
from rqbilling.providers import Caller, Found, Sent, answered
from rqbilling.settings import Provider


def _call(
    method: str, url: str, headers: dict[str, str], body: bytes | None, timeout_s: float
) -> tuple[int, bytes]:
    """One request: the status and body, an HTTP error's included. URLError when the
    connection could not be opened; any other OSError after the request left."""
    # The base URL is the service's, from the environment: http only, never file: or ftp:.
    if not url.startswith(("http://", "https://")):
        raise urllib.error.URLError(f"not an http URL: {url!r}")
    req = urllib.request.Request(url, data=body, headers=headers, method=method)  # noqa: S310
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as res:  # noqa: S310
            return int(res.status), res.read()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read()


def _never_sent(exc: urllib.error.URLError) -> bool:
    return isinstance(exc.reason, ConnectionRefusedError)


def _order_id(data: bytes) -> str | None:
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    return str(doc["id"]) if isinstance(doc, dict) and doc.get("id") is not None else None


class Calls(Caller):
    def write(self, p: Provider, body: dict[str, Any], *, key: str, token: int) -> Sent:
        order = {**body, "meta": {"request_id": key, "job_id": str(body.get("job_id", ""))}}
        headers = {**self._headers(token), "Content-Type": "application/json"}
        try:
            status, data = _call(
                "POST", f"{p.url}/orders", headers, json.dumps(order).encode(), self.timeout_s
            )
        except urllib.error.URLError as exc:
            if _never_sent(exc):
                return Sent("failed", f"not sent ({exc.reason})")
            return Sent("unknown", f"no answer ({exc.reason})")
        except (OSError, http.client.HTTPException) as exc:
            return Sent("unknown", f"no answer ({type(exc).__name__})")
        # 409: the same request id is still being handled; 422: it was used with another
        # order (the worker's classification, rqbilling/providers.py).
        return answered(status, data, _order_id(data))

    def lookup(self, p: Provider, *, job_id: str, key: str, token: int) -> Found:
        del job_id  # the service finds an order by the request id it was created under
        url = f"{p.url}/orders?{urlencode({'external_ref': key})}"
        try:
            status, data = _call("GET", url, self._headers(token), None, self.timeout_s)
        except (OSError, http.client.HTTPException) as exc:
            return Found("unavailable", f"no answer ({type(exc).__name__})")
        if status == 404:
            return Found("not_found", "http 404")
        if status != 200:
            return Found("unavailable", f"http {status}")
        ref = _order_id(data)
        if ref is None:
            return Found("unavailable", "http 200 without an id")
        return Found("confirmed", "found by external_ref", ref)
