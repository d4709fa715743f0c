"""The PostgreSQL ledger: the same statements, with row locks instead of a file lock.

A claim selects ``FOR UPDATE SKIP LOCKED`` so concurrent claimers pass over a row another
transaction is leasing instead of queueing behind it; under READ COMMITTED the locked row
is re-checked against the WHERE clause, so an expired lease is taken exactly once.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from harness.contract.errors import LedgerLinkLost
from scenarios.ledger._sql import DDL, Cursor, SqlLedger, Tx

_CONNECT_TIMEOUT_S = 5
#: How long a lost connection is tried again: a server restart (``pg_ctl restart -m
#: fast``) refuses connections for a fraction of a second.
_RECONNECT_S = 5.0


class PostgresLedger(SqlLedger):
    lock_clause = " FOR UPDATE SKIP LOCKED"

    def __init__(self, dsn: str, *, schema: str | None = None) -> None:
        self.dsn = dsn
        self.schema = schema
        self._conn = self._connect()

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S)
        if self.schema:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        return conn

    def _fresh(self) -> None:
        """Connect again when the server dropped this connection (a restart, an admin's
        terminate). A statement that failed with it is not replayed here: a write whose
        outcome is unknown stays the caller's to handle."""
        if not (self._conn.closed or self._conn.broken):
            return
        deadline = time.monotonic() + _RECONNECT_S
        while True:
            try:
                self._conn = self._connect()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _alive(self) -> None:
        """Find out whether the connection still works before a read (a connection the
        server closed looks fine until used); a read is safe to start again."""
        self._fresh()
        try:
            self._conn.execute("SELECT 1")
        except psycopg.OperationalError:
            self._fresh()

    def _ddl(self) -> str:
        return DDL.format(real="DOUBLE PRECISION", bigint="BIGINT", serial="BIGSERIAL PRIMARY KEY")

    def setup(self) -> None:
        """Create the schema and tables if missing; tried again while the server is
        restarting (every statement is ``IF NOT EXISTS``, so a repeat changes nothing)."""
        deadline = time.monotonic() + _RECONNECT_S
        while True:
            try:
                self._setup()
                return
            except LedgerLinkLost:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _setup(self) -> None:
        # Concurrent CREATE TABLE IF NOT EXISTS can still collide in the catalog; every
        # worker runs setup, so serialize it on a lock named after the schema.
        lock = zlib.crc32(f"crashpoint-ledger:{self.schema or ''}".encode())
        with self._write() as tx:
            tx("SELECT pg_advisory_xact_lock(?)", (lock,))
            if self.schema:
                ident = sql.Identifier(self.schema).as_string(self._conn)
                tx(f"CREATE SCHEMA IF NOT EXISTS {ident}")
            for stmt in self._ddl().split(";"):
                if stmt.strip():
                    tx(stmt)

    def _tx(self, cur: psycopg.Cursor[Any]) -> Tx:
        def run(text: str, params: Sequence[Any] = ()) -> Cursor:
            # Our SQL uses `?` marks (SQLite's); psycopg wants `%s`. The text is fixed,
            # never user data, so the literal rewrite is safe.
            return cur.execute(text.replace("?", "%s"), params)

        return run

    @contextmanager
    def _write(self) -> Iterator[Tx]:
        self._fresh()
        with _link_kept(), self._conn.transaction(), self._conn.cursor() as cur:
            yield self._tx(cur)

    @contextmanager
    def _read(self) -> Iterator[Tx]:
        self._alive()
        with _link_kept(), self._conn.transaction(), self._conn.cursor() as cur:
            yield self._tx(cur)

    def close(self) -> None:
        self._conn.close()


@contextmanager
def _link_kept() -> Iterator[None]:
    """A connection the server dropped mid-transaction is :class:`LedgerLinkLost`, which
    names the ledger, not a bare driver error: the next statement reconnects."""
    try:
        yield
    except psycopg.OperationalError as exc:
        said = str(exc).strip().splitlines()
        detail = said[0] if said else type(exc).__name__
        raise LedgerLinkLost(f"the PostgreSQL ledger dropped its connection ({detail})") from exc
