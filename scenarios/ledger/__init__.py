"""Ledger stores for the reference worker: SQLite (embedded default) and PostgreSQL."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from harness.contract.errors import LedgerError
from scenarios.ledger.base import (
    Claimed,
    ClaimRow,
    Dump,
    JobRow,
    LedgerStore,
    OutboxRow,
    ReconcileRow,
    ResultWriteRow,
)

__all__ = [
    "ClaimRow",
    "Claimed",
    "Dump",
    "JobRow",
    "LedgerError",
    "LedgerStore",
    "OutboxRow",
    "ReconcileRow",
    "ResultWriteRow",
    "open_ledger",
    "split_dsn",
]


def split_dsn(dsn: str) -> tuple[str, str | None]:
    """Take our ``?schema=NAME`` out of a PostgreSQL DSN (libpq does not know it)."""
    parts = urlsplit(dsn)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None)
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return urlunsplit(parts._replace(query=rest)), schema


def open_ledger(
    dsn: str, *, schema: str | None = None, base_dir: str | Path | None = None
) -> LedgerStore:
    """Open the ledger named by ``dsn``.

    ``sqlite:///path`` (relative paths resolve against ``base_dir``, else the current
    directory, which for a worker is its state directory) or ``postgresql://...`` with an
    optional ``?schema=NAME``; ``schema`` overrides it.
    """
    if dsn.startswith("sqlite:///"):
        # sqlite:///state/ledger.db is relative, sqlite:////tmp/ledger.db absolute.
        path = Path(dsn.removeprefix("sqlite:///"))
        if not path.is_absolute():
            path = Path(base_dir or os.getcwd()) / path
        from scenarios.ledger.sqlite import SqliteLedger

        return SqliteLedger(path)
    if dsn.startswith(("postgresql://", "postgres://")):
        from scenarios.ledger.postgres import PostgresLedger

        plain, in_dsn = split_dsn(dsn)
        return PostgresLedger(plain, schema=schema or in_dsn)
    raise LedgerError(
        f"ledger DSN {dsn!r} is not understood; use sqlite:///path/to/ledger.db or "
        f"postgresql://user:pass@host:port/db[?schema=NAME]"
    )
