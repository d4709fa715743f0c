"""``ProviderClient``: the harness's handle on a provider's control and oracle APIs."""

from __future__ import annotations

import ssl
import time
from typing import Any

import httpx

from fake_providers.models import Arrival, Effect, Fault, Held
from fake_providers.seal import SECRET_HEADER
from harness.contract.errors import ProviderError, RendezvousTimeout

#: Longest single long-poll; ``wait_held`` loops for longer waits.
_POLL_S = 5.0


class ProviderClient:
    """Arm faults, meet held requests, and read the ground truth of one provider.

    ``secret`` is the provider's (``ProviderProcess.client`` has it already; a provider
    started by hand prints it in its ready line); every call carries it.
    """

    def __init__(self, url: str, *, timeout_s: float = 10.0, secret: str | None = None) -> None:
        self.url = url.rstrip("/")
        # Providers speak plain HTTP on loopback, so TLS never happens; an empty
        # context spares loading the CA bundle (20-200 ms per client, paid by every
        # start_provider otherwise). It still verifies, so TLS would fail, not pass.
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        headers = {SECRET_HEADER: secret} if secret is not None else None
        # No kept-alive connections: a provider is killed and restarted under its client,
        # and a pooled socket to a dead server outlives every owner that could close it,
        # to be found by the garbage collector. A loopback connect costs far less.
        self._http = httpx.Client(
            base_url=self.url,
            timeout=timeout_s,
            verify=tls,
            headers=headers,
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ProviderClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def health(self) -> dict[str, Any]:
        return dict(self._call("GET", "/_control/health"))

    def arm(self, fault: Fault) -> str:
        """Arm ``fault`` for the next matching request(s); returns its fault id."""
        return str(self._call("POST", "/_control/faults", json=fault.to_json())["fault_id"])

    def faults(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/_control/faults"))

    def wait_held(self, fault_id: str, timeout_s: float, *, after: int = 0) -> Held:
        """Block until a request past arrival ``after`` is held under ``fault_id`` (or was,
        and its deadline let it go: ``Held.released_by``); raise RendezvousTimeout if not."""
        [held] = self._wait(fault_id, None, timeout_s, after)
        return held

    def wait_held_count(
        self, fault_id: str, count: int, timeout_s: float, *, after: int = 0
    ) -> list[Held]:
        """Block until ``count`` requests are held under a ``times >= count`` hold fault."""
        return self._wait(fault_id, count, timeout_s, after)

    def _wait(self, fault_id: str, count: int | None, timeout_s: float, after: int) -> list[Held]:
        deadline = time.monotonic() + timeout_s
        while True:
            left = max(0.0, deadline - time.monotonic())
            poll = min(left, _POLL_S)
            params = {"timeout_s": f"{poll:.3f}"}
            if count is not None:
                params["count"] = str(count)
            if after:
                params["after"] = str(after)
            r = self._request(
                "GET", f"/_control/faults/{fault_id}/held", params=params, timeout=poll + 10.0
            )
            if r.status_code == 200:
                data = r.json()
                return [Held.from_json(h) for h in (data if count is not None else [data])]
            if r.status_code != 408:
                raise self._error(r)
            if time.monotonic() >= deadline:
                what = "a request was" if count is None else f"{count} requests were"
                raise RendezvousTimeout(
                    f"not {what} held under fault {fault_id} at {self.url} within "
                    f"{timeout_s:g} s; check the fault matches the job, key or marker the "
                    f"worker sends (see faults()), or raise timeout_s"
                )

    def release(
        self,
        fault_id: str,
        outcome: str = "commit",
        *,
        arrival_id: int | None = None,
        by: float | None = None,
    ) -> int:
        """Release held request(s): ``commit`` (or ``respond``) or ``drop``; returns how many.

        With ``by`` (this machine's monotonic clock, as ``Held.t_mono``), not now: the
        provider lets them go at ``by`` unless their deadline is earlier; returns how
        many now have it. 0 when the holds were let go already (their deadline came).
        """
        body: dict[str, Any] = {"outcome": outcome}
        if arrival_id is not None:
            body["arrival_id"] = arrival_id
        if by is not None:
            body["release_by"] = by
        doc = self._call("POST", f"/_control/faults/{fault_id}/release", json=body)
        return int(doc["scheduled"] if by is not None else doc["released"])

    def configure(self, *, key_ttl_s: float | None = None) -> dict[str, Any]:
        """Change the provider's settings (``key_ttl_s``: how long it remembers a key);
        returns them as they now are."""
        body = {} if key_ttl_s is None else {"key_ttl_s": key_ttl_s}
        return dict(self._call("POST", "/_control/settings", json=body))

    def set_identity(self, identity: str, state: str, *, now_acts_as: str | None = None) -> None:
        """From now on refuse requests under ``identity``: ``expired`` (401) or ``changed``
        (403; its profile now acts as ``now_acts_as``); ``valid`` serves them again."""
        body: dict[str, Any] = {"identity": identity, "state": state}
        if now_acts_as is not None:
            body["now_acts_as"] = now_acts_as
        self._call("POST", "/_control/identities", json=body)

    def disarm_all(self) -> None:
        self._call("DELETE", "/_control/faults")

    def reset(self) -> int:
        """Disarm every fault and drop every held request; returns how many were held."""
        return int(self._call("POST", "/_control/reset")["released"])

    def wipe(self) -> dict[str, Any]:
        """Make the provider as fresh as a new start (``/_control/wipe``); returns
        ``{"url", "fenced", "dropped"}``. A provider that moved is followed to its url."""
        doc = dict(self._call("POST", "/_control/wipe"))
        if doc.get("url"):
            self.move(str(doc["url"]))
        return doc

    def move(self, url: str) -> None:
        """Talk to the provider at ``url`` from now on (it moved to a new port)."""
        self.url = url.rstrip("/")
        self._http.base_url = httpx.URL(self.url)

    def arrivals(self, *, after: int = 0) -> list[Arrival]:
        """Every arrival in order, or only those with ``id > after``.

        Kinds: ``write`` and ``lookup`` (the business API), and ``control_denied`` (a
        control or oracle call refused for want of the secret: a worker reaching for the
        ground truth).
        """
        params = {"after": str(after)} if after else None
        return [Arrival.from_json(a) for a in self._call("GET", "/_oracle/arrivals", params=params)]

    def effects(self) -> list[Effect]:
        """Every committed effect, in commit order: the ground truth."""
        return [Effect.from_json(e) for e in self._call("GET", "/_oracle/effects")]

    def releases(self) -> list[dict[str, Any]]:
        """How and when each held request was let go, in order: ``arrival_id``,
        ``fault_id``, ``action``, ``job_id``, ``outcome`` (commit or drop),
        ``released_by`` (harness, deadline, hold_max, reset), ``t_mono``."""
        return list(self._call("GET", "/_oracle/releases"))

    def tools(self) -> list[dict[str, Any]]:
        """The tools the provider serves at ``/mcp`` with their annotations, as declared
        to MCP clients (``name``, ``role``, ``path``, ``annotations``); none on HTTP."""
        return list(self._call("GET", "/_oracle/tools"))

    # -- plumbing -------------------------------------------------------------------

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        r = self._request(method, path, **kw)
        if r.status_code >= 300:
            raise self._error(r)
        return r.json()

    def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise ProviderError(
                f"{method} {self.url}{path} failed: {type(exc).__name__}: {exc}; "
                f"is the provider running (start_provider) and its URL right?"
            ) from exc

    def _error(self, r: httpx.Response) -> ProviderError:
        try:
            detail = r.json().get("detail", r.text)
        except ValueError:
            detail = r.text
        return ProviderError(
            f"{r.request.method} {r.request.url} answered {r.status_code}: {detail}"
        )
