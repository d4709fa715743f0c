"""Finding a Toxiproxy server, and building the pinned one where Go is present.

The order is the design's: ``TOXIPROXY_URL`` (a running server), ``TOXIPROXY_SERVER`` (a
binary), ``toxiproxy-server`` on ``PATH``, the cached build, and ``go install`` (only with
``build=True``: it takes a minute and needs the network).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
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
    # The reason is repeated on every network cell it skips: short, and no PATH dump.
    if go:
        raise ToxiproxyUnavailable(
            f"no toxiproxy-server on PATH and no cached build at {cached}; Go is at {go}, "
            f"so run `{INSTALL_HINT}` (1-2 minutes, once)"
        )
    raise ToxiproxyUnavailable(
        "no toxiproxy-server on PATH, no cached build and no Go toolchain to build one: "
        f"install Go (apt-get install golang-go) and run `{INSTALL_HINT}`, or set "
        "TOXIPROXY_SERVER to a toxiproxy-server binary"
    )


def build_toxiproxy(
    dest: Path,
    *,
    go: str = "go",
    env: Mapping[str, str] | None = None,
    timeout_s: float = 900,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """``go install`` the pinned server (with its version stamped) and move it to ``dest``.

    The first build takes one to two minutes (modules to fetch, then a compile); it says
    so, then says what Go is doing every ``PROGRESS_EVERY_S`` (``progress``, stderr by
    default), so a first run is never a silent wait.
    """
    say = progress or _to_stderr
    gobin = dest.parent / "gobin"
    gobin.mkdir(parents=True, exist_ok=True)
    build_env = {**(os.environ if env is None else env), "GOBIN": str(gobin)}
    build_env["GOFLAGS"] = "-buildvcs=false"
    argv = [go, "install", "-ldflags", GO_LDFLAGS, f"{GO_PACKAGE}@v{TOXIPROXY_VERSION}"]
    say(
        f"crashpoint: building Toxiproxy {TOXIPROXY_VERSION} with `go install` (once; usually "
        f"1-2 minutes, then cached at {dest})"
    )
    try:
        code, stderr = _run_with_progress(argv, build_env, timeout_s=timeout_s, say=say)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToxiproxyUnavailable(f"`{' '.join(argv)}` failed: {exc}") from exc
    if code != 0:
        raise ToxiproxyUnavailable(
            f"`{' '.join(argv)}` exited {code}: {stderr.strip()[-500:]}; "
            "check network access to the Go module proxy"
        )
    # go install names the binary after its package directory ("server").
    (gobin / "server").replace(dest)
    shutil.rmtree(gobin, ignore_errors=True)
    return dest


#: How often a build in progress says what it is doing.
PROGRESS_EVERY_S = 10.0


def _run_with_progress(
    argv: list[str], env: Mapping[str, str], *, timeout_s: float, say: Callable[[str], None]
) -> tuple[int, str]:
    """Run ``argv``; every PROGRESS_EVERY_S, say how long it has run and Go's last line
    (``go: downloading ...`` while it fetches modules). Returns (exit code, stderr)."""
    lines: list[str] = []
    started = time.monotonic()
    with subprocess.Popen(
        argv, env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stderr is not None
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
        reader.start()
        while True:
            try:
                code = proc.wait(timeout=PROGRESS_EVERY_S)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - started
                if elapsed > timeout_s:
                    proc.kill()
                    raise
                last = lines[-1].strip() if lines else "resolving modules"
                say(f"crashpoint: still building Toxiproxy ({elapsed:.0f} s): {last}")
        reader.join(timeout=5)
    return code, "".join(lines)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
