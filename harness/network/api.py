"""The Toxiproxy control API: the one module that talks to toxiproxy-python.

toxiproxy-python 0.1.1 keeps the server address in class attributes of ``APIConsumer``
(one server per process), sends requests without timeouts and cannot update a toxic. We
contain all three here: every control call goes through :class:`ControlApi`, which points
``APIConsumer`` at its own server under a module lock for exactly one request and passes
an explicit ``timeout`` (``APIConsumer`` forwards keyword arguments to ``requests``; the
``Proxy`` and ``Toxiproxy`` methods do not, so we do not use them). A toxic update is a
``POST`` to the toxic's own URL, which the client has no method for but ``APIConsumer``
can still send.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import requests
from toxiproxy.api import APIConsumer
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists

from harness.contract.errors import ConfigError, InfrastructureError

CONTROL_TIMEOUT_S = 2.0
_NO_PROXIES = {"http": None, "https": None}  # never send loopback control calls via HTTP_PROXY

_api_lock = threading.Lock()


class ControlApi:
    """toxiproxy-python's ``APIConsumer`` aimed at one server, one request at a time."""

    def __init__(self, host: str, port: int, *, timeout_s: float = CONTROL_TIMEOUT_S) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s

    def get(self, path: str) -> Any:
        return self._call("get", path)

    def post(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        return self._call("post", path, json=dict(body) if body is not None else None)

    def delete(self, path: str) -> Any:
        return self._call("delete", path)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        where = f"http://{self.host}:{self.port}{path}"
        with _api_lock:
            saved = APIConsumer.host, APIConsumer.port
            APIConsumer.host, APIConsumer.port = self.host, self.port
            try:
                response = getattr(APIConsumer, method)(
                    path, timeout=self.timeout_s, proxies=_NO_PROXIES, **kwargs
                )
            except (ProxyExists, NotFound, InvalidToxic) as exc:
                raise InfrastructureError(
                    f"Toxiproxy refused {method.upper()} {where}: {type(exc).__name__} {_text(exc)}"
                ) from exc
            except requests.RequestException as exc:
                raise InfrastructureError(
                    f"Toxiproxy at {self.host}:{self.port} did not answer {method.upper()} "
                    f"{path} within {self.timeout_s} s: {exc}"
                ) from exc
            finally:
                APIConsumer.host, APIConsumer.port = saved
        if response.status_code >= 400:
            raise InfrastructureError(
                f"Toxiproxy answered {response.status_code} to {method.upper()} {where}: "
                f"{response.text[:300]}"
            )
        if not response.content:
            return None
        if response.headers.get("Content-Type", "").startswith("application/json"):
            return response.json()
        return response.text


def host_port(address: str, *, what: str) -> tuple[str, int]:
    """``host:port`` or a URL -> (host, port)."""
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if not parts.hostname or parts.port is None:
        raise ConfigError(f"{what}={address!r} is not host:port or a URL with a port")
    return parts.hostname, parts.port


def _text(exc: Exception) -> str:
    arg = exc.args[0] if exc.args else ""
    return arg.decode(errors="replace") if isinstance(arg, bytes) else str(arg)
