"""The PostgreSQL ledger: the same statements, with row locks instead of a file lock.

A claim selects ``FOR UPDATE SKIP LOCKED`` so concurrent claimers pass over a row another
transaction is leasing instead of queueing behind it; under READ COMMITTED the locked row
is re-checked against the WHERE clause, so an expired lease is taken exactly once.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from scenarios.ledger._sql import DDL, Cursor, SqlLedger, Tx

_CONNECT_TIMEOUT_S = 5


class PostgresLedger(SqlLedger):
    lock_clause = " FOR UPDATE SKIP LOCKED"

    def __init__(self, dsn: str, *, schema: str | None = None) -> None:
        self.dsn = dsn
        self.schema = schema
        self._conn = psycopg.connect(dsn, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S)
        if schema:
            self._conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))

    def _ddl(self) -> str:
        return DDL.format(real="DOUBLE PRECISION", bigint="BIGINT", serial="BIGSERIAL PRIMARY KEY")

    def setup(self) -> None:
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
        with self._conn.transaction(), self._conn.cursor() as cur:
            yield self._tx(cur)

    _read = _write

    def close(self) -> None:
        self._conn.close()
