"""Finding a Toxiproxy server, and building the pinned one where Go is present.

The order is the design's: ``TOXIPROXY_URL`` (a running server), ``TOXIPROXY_SERVER`` (a
binary), ``toxiproxy-server`` on ``PATH``, the cached build, and ``go install`` (only with
``build=True``: it takes a minute and needs the network).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.cachedir import cache_root
from harness.contract.errors import InfrastructureError, ToxiproxyUnavailable
from harness.network.api import ControlApi, host_port

TOXIPROXY_VERSION = "2.12.0"
GO_PACKAGE = "github.com/Shopify/toxiproxy/v2/cmd/server"
#: Without this the server's ``/version`` answers ``git``.
GO_LDFLAGS = f"-X github.com/Shopify/toxiproxy/v2.Version={TOXIPROXY_VERSION}"
INSTALL_HINT = "bash scripts/install-infra.sh toxiproxy"


@dataclass(frozen=True)
class ToxiproxyLocation:
    """Where a Toxiproxy server comes from: a running ``url`` or a ``binary`` to start."""

    source: str  # TOXIPROXY_URL, TOXIPROXY_SERVER, PATH, cache, go install
    binary: Path | None = None
    url: str | None = None

    def describe(self) -> str:
        return f"{self.url or self.binary} (from {self.source})"


def cached_binary(env: Mapping[str, str] | None = None) -> Path:
    """Where the pinned build lives: ``$CRASHPOINT_CACHE``, else ``~/.cache/crashpoint``."""
    return cache_root(env) / f"toxiproxy-{TOXIPROXY_VERSION}" / "toxiproxy-server"


def find_toxiproxy(
    *, build: bool = False, env: Mapping[str, str] | None = None
) -> ToxiproxyLocation:
    """Locate a Toxiproxy server, or raise :class:`ToxiproxyUnavailable` saying how to get one.

    ``env`` defaults to ``os.environ``. An explicit ``TOXIPROXY_URL`` or
    ``TOXIPROXY_SERVER`` that does not work is an error, not a reason to look elsewhere.
    """
    env = os.environ if env is None else env
    if url := env.get("TOXIPROXY_URL"):
        host, port = host_port(url, what="TOXIPROXY_URL")
        try:
            ControlApi(host, port, timeout_s=1.0).get("/version")
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
