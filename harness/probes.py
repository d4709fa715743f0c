"""Is the optional server there? PostgreSQL and Docker, asked one way for everyone.

``crashpoint doctor``, the run's infrastructure and the test suite's fixtures all ask
these questions; each probe answers with a version or raises :class:`ProbeFailed`
carrying what went wrong and the command that brings the server.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from harness.contract.env import DEFAULT_PG_DSN, PG_DSN
from harness.contract.errors import InfrastructureError

POSTGRES_FIX = "bash scripts/install-infra.sh postgres"
DOCKER_FIX = "bash scripts/install-infra.sh docker"
_KEYWORD_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")


class ProbeFailed(InfrastructureError):
    """A server did not answer: ``what`` happened, and ``fix`` brings it."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(f"{what}; start it with `{fix}`")
        self.what = what
        self.fix = fix


@dataclass(frozen=True)
class DockerVersion:
    engine: str
    api: str


def postgres_dsn(explicit: str | None = None) -> str:
    """The PostgreSQL to use: ``explicit``, else ``CRASHPOINT_PG_DSN``, else the install
    script's server."""
    return explicit or os.environ.get(PG_DSN) or DEFAULT_PG_DSN


def postgres_version(dsn: str, *, timeout_s: int = 3) -> str:
    """The server version (``16.4``) of the PostgreSQL at ``dsn``."""
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=timeout_s) as conn:
            row = conn.execute("SHOW server_version").fetchone()
    except Exception as exc:  # ImportError, psycopg.Error, OSError: all mean "not here"
        raise ProbeFailed(
            f"PostgreSQL at {redact(dsn)} is not reachable ({first_line(exc)})", POSTGRES_FIX
        ) from None
    return str(row[0]).split()[0] if row else "unknown"


def docker_version(*, timeout_s: int = 5) -> DockerVersion:
    """The versions of the Docker engine ``DOCKER_HOST`` (or the local socket) points at."""
    try:
        import docker

        client = docker.from_env(timeout=timeout_s)
        try:
            info = client.version()
        finally:
            client.close()
    except Exception as exc:  # the SDK raises its own, requests' and OSError alike
        raise ProbeFailed(f"no Docker engine answers ({first_line(exc)})", DOCKER_FIX) from None
    return DockerVersion(str(info.get("Version", "unknown")), str(info.get("ApiVersion", "?")))


def redact(dsn: str) -> str:
    """``dsn`` without its password, for messages and logs.

    A URL's password is whatever lies between the first ``:`` of the user part and the
    last ``@`` before the host, so a password holding ``@`` or ``:`` is hidden whole; a
    libpq ``key=value`` string has its ``password=`` value hidden.
    """
    if "://" not in dsn:
        return _KEYWORD_PASSWORD.sub(r"\1***", dsn)
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message``, for one-line reports of a probe's failure."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
