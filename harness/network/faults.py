"""Proxies and toxics on one Toxiproxy server, each change recorded in a trial's history."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from harness.contract.errors import ConfigError, InfrastructureError
from harness.history import History
from harness.network.api import host_port
from harness.network.server import ToxiproxyServer

STREAMS = ("downstream", "upstream")


@dataclass(frozen=True)
class ProxyHandle:
    """A proxy: clients connect to ``listen`` and reach ``upstream`` through the toxics."""

    name: str
    upstream: str
    listen: str
    scheme: str = "http"

    @property
    def host(self) -> str:
        return self.listen.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])

    @property
    def url(self) -> str:
        """The upstream's URL with the proxy's address in it (what a worker should use)."""
        return f"{self.scheme}://{self.listen}"


class NetworkFaults:
    """Proxies and toxics on one server; every change goes to the history, if given."""

    def __init__(self, server: ToxiproxyServer, *, history: History | None = None) -> None:
        self._server = server
        self._history = history
        self._proxies: dict[str, ProxyHandle] = {}

    def proxy(self, name: str, upstream: str) -> ProxyHandle:
        """Create a proxy on a free loopback port to ``upstream`` (``host:port`` or a URL)."""
        host, port = host_port(upstream, what=f"upstream of proxy {name!r}")
        scheme = urlsplit(upstream).scheme if "://" in upstream else "http"
        info = self._server.api.post(
            "/proxies",
            {"name": name, "upstream": f"{host}:{port}", "listen": "127.0.0.1:0", "enabled": True},
        )
        handle = ProxyHandle(name, f"{host}:{port}", str(info["listen"]), scheme)
        self._proxies[name] = handle
        return handle

    def add_latency(
        self,
        proxy: ProxyHandle | str,
        latency_ms: int,
        jitter_ms: int = 0,
        *,
        stream: str = "downstream",
        toxicity: float = 1.0,
    ) -> str:
        """Delay data by ``latency_ms`` (plus or minus ``jitter_ms``)."""
        attrs = {"latency": latency_ms, "jitter": jitter_ms}
        return self.add_toxic(proxy, "latency", attrs, stream=stream, toxicity=toxicity)

    def add_timeout(
        self, proxy: ProxyHandle | str, timeout_ms: int, *, stream: str = "downstream"
    ) -> str:
        """Stop all data and close the connection after ``timeout_ms`` (0: hold forever)."""
        return self.add_toxic(proxy, "timeout", {"timeout": timeout_ms}, stream=stream)

    def add_reset_peer(
        self, proxy: ProxyHandle | str, timeout_ms: int = 0, *, stream: str = "downstream"
    ) -> str:
        """Reset connections (TCP RST, ECONNRESET for the client) after ``timeout_ms``."""
        return self.add_toxic(proxy, "reset_peer", {"timeout": timeout_ms}, stream=stream)

    def add_toxic(
        self,
        proxy: ProxyHandle | str,
        toxic_type: str,
        attributes: Mapping[str, int | float],
        *,
        stream: str = "downstream",
        toxicity: float = 1.0,
        name: str | None = None,
    ) -> str:
        """Add any toxic Toxiproxy knows; returns its name (default ``<type>_<stream>``)."""
        if stream not in STREAMS:
            raise ConfigError(f"toxic stream must be one of {STREAMS}, got stream={stream!r}")
        pname = _name(proxy)
        tname = name or f"{toxic_type}_{stream}"
        self._server.api.post(
            f"/proxies/{pname}/toxics",
            {
                "name": tname,
                "type": toxic_type,
                "stream": stream,
                "toxicity": toxicity,
                "attributes": dict(attributes),
            },
        )
        self._record(
            "toxic_on",
            pname,
            tname,
            type=toxic_type,
            stream=stream,
            toxicity=toxicity,
            attributes=dict(attributes),
        )
        return tname

    def update_toxic(
        self, proxy: ProxyHandle | str, toxic: str, attributes: Mapping[str, int | float]
    ) -> None:
        """Change a toxic's attributes in place (toxiproxy-python has no method for this)."""
        pname = _name(proxy)
        self._server.api.post(f"/proxies/{pname}/toxics/{toxic}", {"attributes": dict(attributes)})
        self._record("toxic_on", pname, toxic, attributes=dict(attributes), update=True)

    def toxics(self, proxy: ProxyHandle | str) -> list[dict[str, Any]]:
        """The toxics now on ``proxy``, as the server reports them."""
        return list(self._server.api.get(f"/proxies/{_name(proxy)}/toxics") or [])

    def remove_toxic(self, proxy: ProxyHandle | str, toxic: str) -> None:
        pname = _name(proxy)
        self._server.api.delete(f"/proxies/{pname}/toxics/{toxic}")
        self._record("toxic_off", pname, toxic)

    def disable(self, proxy: ProxyHandle | str) -> None:
        """Take the proxy down: open connections drop and new ones are refused."""
        pname = _name(proxy)
        self._server.api.post(f"/proxies/{pname}", {"enabled": False})
        self._record("toxic_on", pname, "down", type="down")

    def enable(self, proxy: ProxyHandle | str) -> None:
        pname = _name(proxy)
        self._server.api.post(f"/proxies/{pname}", {"enabled": True})
        self._record("toxic_off", pname, "down", type="down")

    def clear(self) -> None:
        """Remove every toxic from our proxies and enable them (other proxies untouched)."""
        for pname in self._proxies:
            for toxic in self.toxics(pname):
                self.remove_toxic(pname, str(toxic["name"]))
            if not self._server.api.get(f"/proxies/{pname}").get("enabled", True):
                self.enable(pname)

    def close(self) -> None:
        """Delete the proxies this object created."""
        for pname in list(self._proxies):
            with contextlib.suppress(InfrastructureError):
                self._server.api.delete(f"/proxies/{pname}")
            del self._proxies[pname]

    def __enter__(self) -> NetworkFaults:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _record(self, kind: str, proxy: str, toxic: str, **fields: Any) -> None:
        if self._history is not None:
            self._history.append("network", kind, proxy=proxy, toxic=toxic, **fields)


def _name(proxy: ProxyHandle | str) -> str:
    return proxy.name if isinstance(proxy, ProxyHandle) else proxy
