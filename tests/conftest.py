"""Shared fixtures: real infrastructure for the process tier."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from types import FrameType

import pytest
from hypothesis import HealthCheck, settings

from harness.probes import ProbeFailed, postgres_dsn, postgres_version
from harness.pytest_plugin import missing

# The fuzzers' budgets. "ci" (the default) is deterministic, so a red run replays as it
# was; "deep" is for a night of hunting: HYPOTHESIS_PROFILE=deep pytest tests/unit -k fuzz.
settings.register_profile(
    "ci",
    max_examples=100,
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("deep", max_examples=5000, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _not_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests see crashpoint as a developer does, wherever they run: CI=true turns
    --strict on (harness/cli_options.py), which the tests that mean it ask for themselves."""
    monkeypatch.delenv("CI", raising=False)


def pytest_configure(config: pytest.Config) -> None:
    # A cancelled CI job stops its tests with SIGTERM, which ends pytest at once: the
    # processes a test started itself (not through the harness, whose watchdog reaps
    # its own) outlived the run. Taken as a Ctrl-C, every fixture's teardown runs first.
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@pytest.fixture(scope="session")
def pg_dsn(pytestconfig: pytest.Config) -> str:
    """A DSN for a running PostgreSQL (``CRASHPOINT_PG_DSN``, else the install script's)."""
    dsn = postgres_dsn()
    try:
        postgres_version(dsn)
    except ProbeFailed as exc:
        missing(pytestconfig, str(exc))
    return dsn


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A fresh, uniquely named PostgreSQL schema, dropped afterwards."""
    import uuid

    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')
