"""What is available here, and the one command that brings the rest (``crashpoint doctor``
prints it: ``harness.commands.doctor``).

Each probe returns a :class:`Check`; only the embedded default (Python and SQLite) is
required.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from harness.contract.errors import CrashpointError
from harness.probes import (
    ProbeFailed,
    docker_version,
    first_line,
    postgres_dsn,
    postgres_version,
    redact,
)

MIN_PYTHON = (3, 11)


@dataclass(frozen=True)
class Check:
    """One component: found or not, what we saw, and how to get it."""

    component: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = False
    version: str | None = None


def check_python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    ok = sys.version_info[:2] >= MIN_PYTHON
    detail = f"{sys.executable}; SQLite {sqlite3.sqlite_version}"
    fix = "" if ok else f"use Python {'.'.join(map(str, MIN_PYTHON))} or newer"
    return Check("Python + SQLite", ok, detail, fix, required=True, version=version)


def check_toxiproxy() -> Check:
    from harness.network import INSTALL_HINT, ToxiproxyServer, find_toxiproxy

    try:
        location = find_toxiproxy()
        with ToxiproxyServer(location, ready_timeout_s=3.0) as server:
            version = server.version()
    except CrashpointError as exc:
        return Check("Toxiproxy", False, str(exc), INSTALL_HINT)
    return Check("Toxiproxy", True, location.describe(), version=version)


def check_postgres() -> Check:
    dsn = postgres_dsn()
    try:
        version = postgres_version(dsn)
    except ProbeFailed as exc:
        return Check("PostgreSQL", False, exc.what, exc.fix)
    return Check("PostgreSQL", True, redact(dsn), version=version)


def check_docker() -> Check:
    try:
        engine = docker_version(timeout_s=3)
    except ProbeFailed as exc:
        return Check("Docker engine", False, exc.what, exc.fix)
    detail = f"API {engine.api} at {os.environ.get('DOCKER_HOST', 'local socket')}"
    return Check("Docker engine", True, detail, version=engine.engine)


def check_containment() -> Check:
    """Whether workers get a cgroup v2 each (every descendant reached) or the fallback."""
    from harness.backends.cgroup import open_root, wanted
    from harness.contract.env import CONTAINMENT

    root, why = open_root(wanted(os.environ.get(CONTAINMENT)))
    if root is None:
        return Check(
            "Worker containment",
            False,
            f"process groups plus psutil (a double-forked daemon can escape): {why}",
            "run as root on a machine with a cgroup v2 hierarchy (Linux 5.14 or later)",
        )
    root.remove()
    return Check("Worker containment", True, f"a cgroup v2 per worker under {root.path.parent}")


def check_chromium() -> Check:
    fix = "bash scripts/install-infra.sh browser"
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path is None:
            continue
        try:
            out = subprocess.run(
                [path, "--version"], capture_output=True, text=True, timeout=10, check=False
            ).stdout
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Check("Chromium", False, f"{path}: {exc}", fix)
        # Debian's wrapper script may print shell noise before the version line.
        line = next((ln for ln in out.splitlines() if "Chrom" in ln), out.strip())
        version = next((w for w in line.split() if w[:1].isdigit()), None)
        return Check("Chromium", True, f"{path} (report browser tests)", version=version)
    return Check("Chromium", False, "no chromium on PATH (report browser tests only)", fix)


PROBES: tuple[Callable[[], Check], ...] = (
    check_python,
    check_toxiproxy,
    check_postgres,
    check_docker,
    check_containment,
    check_chromium,
)


def run_checks(probes: Iterable[Callable[[], Check]] = PROBES) -> list[Check]:
    """Every probe's check; a probe that breaks is a finding, not a crash of the doctor."""
    return [_safe(p) for p in probes]


def _safe(probe: Callable[[], Check]) -> Check:
    try:
        return probe()
    except Exception as exc:
        name = probe.__name__.removeprefix("check_")
        return Check(name, False, f"probe failed: {first_line(exc)}")
