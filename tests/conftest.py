"""Shared fixtures: real infrastructure for the process tier."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from harness.pytest_plugin import missing

DEFAULT_PG_DSN = "postgresql://crashpoint:crashpoint@127.0.0.1:5432/crashpoint"


@pytest.fixture(scope="session")
def pg_dsn(pytestconfig: pytest.Config) -> str:
    """A DSN for a running PostgreSQL (``CRASHPOINT_PG_DSN``, else the install script's)."""
    dsn = os.environ.get("CRASHPOINT_PG_DSN", DEFAULT_PG_DSN)
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        missing(pytestconfig, f"PostgreSQL at {dsn} ({exc}); run scripts/install-infra.sh postgres")
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
