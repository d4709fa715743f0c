"""Network faults through Toxiproxy; the only module that touches toxiproxy-python.

toxiproxy-python 0.1.1 keeps the server address in class attributes of ``APIConsumer``
(one server per process), sends requests without timeouts and cannot update a toxic. We
contain all three here: every control call goes through :class:`_Api`, which points
``APIConsumer`` at its own server under a module lock for exactly one request and passes
an explicit ``timeout`` (``APIConsumer`` forwards keyword arguments to ``requests``; the
``Proxy`` and ``Toxiproxy`` methods do not, so we do not use them). A toxic update is a
``POST`` to the toxic's own URL, which the client has no method for but ``APIConsumer``
can still send.

Finding the server follows the design's order: ``TOXIPROXY_URL`` (a running server),
``TOXIPROXY_SERVER`` (a binary), ``toxiproxy-server`` on ``PATH``, the cached build, and
``go install`` (only with ``build=True``: it takes a minute and needs the network).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import requests
from toxiproxy.api import APIConsumer
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists

from harness.contract.errors import ConfigError, InfrastructureError, ToxiproxyUnavailable
from harness.history import History
from harness.watchdog import Watchdog

TOXIPROXY_VERSION = "2.12.0"
GO_PACKAGE = "github.com/Shopify/toxiproxy/v2/cmd/server"
#: Without this the server's ``/version`` answers ``git``.
GO_LDFLAGS = f"-X github.com/Shopify/toxiproxy/v2.Version={TOXIPROXY_VERSION}"
INSTALL_HINT = "bash scripts/install-infra.sh toxiproxy"

CONTROL_TIMEOUT_S = 2.0
_NO_PROXIES = {"http": None, "https": None}  # never send loopback control calls via HTTP_PROXY

# ---------------------------------------------------------------------------- finding


@dataclass(frozen=True)
class ToxiproxyLocation:
    """Where a Toxiproxy server comes from: a running ``url`` or a ``binary`` to start."""

    source: str  # TOXIPROXY_URL, TOXIPROXY_SERVER, PATH, cache, go install
    binary: Path | None = None
    url: str | None = None

    def describe(self) -> str:
        return f"{self.url or self.binary} (from {self.source})"


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("CRASHPOINT_CACHE"):
        return Path(env["CRASHPOINT_CACHE"])
    return Path(env.get("HOME") or Path.home()) / ".cache" / "crashpoint"


def cached_binary(env: Mapping[str, str] | None = None) -> Path:
    return cache_dir(env) / f"toxiproxy-{TOXIPROXY_VERSION}" / "toxiproxy-server"


def find_toxiproxy(
    *, build: bool = False, env: Mapping[str, str] | None = None
) -> ToxiproxyLocation:
    """Locate a Toxiproxy server, or raise :class:`ToxiproxyUnavailable` saying how to get one.

    ``env`` defaults to ``os.environ``. An explicit ``TOXIPROXY_URL`` or
    ``TOXIPROXY_SERVER`` that does not work is an error, not a reason to look elsewhere.
    """
    env = os.environ if env is None else env
    if url := env.get("TOXIPROXY_URL"):
        host, port = _host_port(url, what="TOXIPROXY_URL")
        try:
            _Api(host, port, timeout_s=1.0).get("/version")
        except InfrastructureError as exc:
            raise ToxiproxyUnavailable(
                f"TOXIPROXY_URL={url!r} does not answer ({exc}); start that server or unset "
                "TOXIPROXY_URL to let crashpoint start its own"
            ) from exc
        return ToxiproxyLocation("TOXIPROXY_URL", url=url.rstrip("/"))
    if explicit := env.get("TOXIPROXY_SERVER"):
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ToxiproxyUnavailable(
                f"TOXIPROXY_SERVER={explicit!r} is not an executable file; point it at a "
                f"toxiproxy-server binary or unset it (to build one: {INSTALL_HINT})"
            )
        return ToxiproxyLocation("TOXIPROXY_SERVER", binary=path)
    search_path = env.get("PATH", "")
    if on_path := shutil.which("toxiproxy-server", path=search_path):
        return ToxiproxyLocation("PATH", binary=Path(on_path))
    cached = cached_binary(env)
    if cached.is_file() and os.access(cached, os.X_OK):
        return ToxiproxyLocation("cache", binary=cached)
    go = shutil.which("go", path=search_path)
    if go and build:
        return ToxiproxyLocation("go install", binary=build_toxiproxy(cached, go=go, env=env))
    tried = (
        f"TOXIPROXY_URL and TOXIPROXY_SERVER are unset, toxiproxy-server is not on "
        f"PATH={search_path!r}, and there is no cached build at {cached}"
    )
    if go:
        raise ToxiproxyUnavailable(
            f"no Toxiproxy server: {tried}; Go is at {go}, so run `{INSTALL_HINT}` "
            "(about a minute) or call find_toxiproxy(build=True)"
        )
    raise ToxiproxyUnavailable(
        f"no Toxiproxy server: {tried}, and Go is not installed; install Go and run "
        f"`{INSTALL_HINT}`, or set TOXIPROXY_SERVER to a toxiproxy-server binary"
    )


def build_toxiproxy(
    dest: Path, *, go: str = "go", env: Mapping[str, str] | None = None, timeout_s: float = 900
) -> Path:
    """``go install`` the pinned server (with its version stamped) and move it to ``dest``."""
    gobin = dest.parent / "gobin"
    gobin.mkdir(parents=True, exist_ok=True)
    build_env = {**(os.environ if env is None else env), "GOBIN": str(gobin)}
    build_env["GOFLAGS"] = "-buildvcs=false"
    argv = [go, "install", "-ldflags", GO_LDFLAGS, f"{GO_PACKAGE}@v{TOXIPROXY_VERSION}"]
    try:
        done = subprocess.run(
            argv, env=build_env, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToxiproxyUnavailable(f"`{' '.join(argv)}` failed: {exc}") from exc
    if done.returncode != 0:
        raise ToxiproxyUnavailable(
            f"`{' '.join(argv)}` exited {done.returncode}: {done.stderr.strip()[-500:]}; "
            "check network access to the Go module proxy"
        )
    # go install names the binary after its package directory ("server").
    (gobin / "server").replace(dest)
    shutil.rmtree(gobin, ignore_errors=True)
    return dest


def _host_port(address: str, *, what: str) -> tuple[str, int]:
    """``host:port`` or a URL -> (host, port)."""
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if not parts.hostname or parts.port is None:
        raise ConfigError(f"{what}={address!r} is not host:port or a URL with a port")
    return parts.hostname, parts.port


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------- control API

_api_lock = threading.Lock()


class _Api:
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


def _text(exc: Exception) -> str:
    arg = exc.args[0] if exc.args else ""
    return arg.decode(errors="replace") if isinstance(arg, bytes) else str(arg)


# -------------------------------------------------------------------------------- server


class ToxiproxyServer:
    """A Toxiproxy server: started from a binary on a free loopback port, or attached to
    the one ``TOXIPROXY_URL`` names (then :meth:`stop` leaves it running)."""

    def __init__(
        self,
        location: ToxiproxyLocation | None = None,
        *,
        host: str = "127.0.0.1",
        ready_timeout_s: float = 5.0,
        watchdog: Watchdog | None = None,
    ) -> None:
        self.location = location
        self.host = host
        self.port = 0
        self.ready_timeout_s = ready_timeout_s
        self._watchdog = watchdog
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def api(self) -> _Api:
        if not self.port:
            raise InfrastructureError("the Toxiproxy server is not started; call start() first")
        return _Api(self.host, self.port)

    def start(self) -> ToxiproxyServer:
        if self._proc is not None:
            return self  # already running
        if self.location is None:
            self.location = find_toxiproxy()
        if self.location.url is not None:
            self.host, self.port = _host_port(self.location.url, what="TOXIPROXY_URL")
            return self
        assert self.location.binary is not None
        last_error = ""
        for _ in range(3):  # a free port can be taken between our probe and the bind
            self.port = free_port(self.host)
            last_error = self._spawn(self.location.binary)
            if not last_error:
                return self
        raise ToxiproxyUnavailable(
            f"{self.location.describe()} did not start on {self.host}: {last_error}; "
            f"check the binary runs (`{self.location.binary} -version`) or rebuild it "
            f"with `{INSTALL_HINT}`"
        )

    def _spawn(self, binary: Path) -> str:
        """Start the binary and wait until it answers; '' on success, else why not."""
        # Anonymous, so nothing is left on disk; it lives as long as the server (_discard).
        self._log = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self._proc = subprocess.Popen(
                [str(binary), "-host", self.host, "-port", str(self.port)],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "LOG_LEVEL": os.environ.get("LOG_LEVEL", "warn")},
            )
        except OSError as exc:
            return str(exc)
        if self._watchdog is not None:
            self._watchdog.watch_group(self._proc.pid)
        api = _Api(self.host, self.port, timeout_s=0.5)
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                why = f"exited {self._proc.returncode}: {self._log_tail()}"
                self._discard()
                return why
            if _port_open(self.host, self.port):
                with contextlib.suppress(InfrastructureError):
                    api.get("/version")
                    return ""
            time.sleep(0.005)
        self._discard()
        return f"no answer within {self.ready_timeout_s} s"

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read()[-400:].decode(errors="replace").strip()

    def version(self) -> str:
        """The server's version, e.g. ``2.12.0`` (older servers answer plain text)."""
        answer = self.api.get("/version")
        if isinstance(answer, dict):
            return str(answer.get("version", answer))
        return str(answer).strip()

    def reset(self) -> None:
        """Enable every proxy and remove every toxic (between trials)."""
        self.api.post("/reset")

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGTERM the server (it exits cleanly), SIGKILL if it lingers, and reap it."""
        if self._proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._discard()

    def _discard(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            if self._watchdog is not None:
                self._watchdog.forget_group(self._proc.pid)
            self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> ToxiproxyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex((host, port)) == 0


# -------------------------------------------------------------------------------- faults


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


STREAMS = ("downstream", "upstream")


class NetworkFaults:
    """Proxies and toxics on one server; every change goes to the history, if given."""

    def __init__(self, server: ToxiproxyServer, *, history: History | None = None) -> None:
        self._server = server
        self._history = history
        self._proxies: dict[str, ProxyHandle] = {}

    def proxy(self, name: str, upstream: str) -> ProxyHandle:
        """Create a proxy on a free loopback port to ``upstream`` (``host:port`` or a URL)."""
        host, port = _host_port(upstream, what=f"upstream of proxy {name!r}")
        scheme = urlsplit(upstream).scheme if "://" in upstream else "http"
        info = self._server.api.post(
            "/proxies",
            {"name": name, "upstream": f"{host}:{port}", "listen": "127.0.0.1:0", "enabled": True},
        )
        handle = ProxyHandle(name, f"{host}:{port}", str(info["listen"]), scheme)
        self._proxies[name] = handle
        return handle

    def proxies(self) -> list[ProxyHandle]:
        return list(self._proxies.values())

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


@contextlib.contextmanager
def toxiproxy(
    *, watchdog: Watchdog | None = None, history: History | None = None
) -> Iterator[NetworkFaults]:
    """Find and start a server and yield its :class:`NetworkFaults`; stop it afterwards."""
    with (
        ToxiproxyServer(watchdog=watchdog) as server,
        NetworkFaults(server, history=history) as faults,
    ):
        yield faults
