"""The embedded ledger: one SQLite file in WAL mode, shared by every worker process.

Writers take the database lock up front with ``BEGIN IMMEDIATE``: a deferred transaction
that reads and then writes can fail with SQLITE_BUSY at its first write, where the busy
handler cannot help, and a claim is exactly such a read-then-write.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from scenarios.ledger._sql import DDL, Cursor, SqlLedger, Tx

_BUSY_TIMEOUT_S = 30.0


class SqliteLedger(SqlLedger):
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._conn = sqlite3.connect(
            self.path, isolation_level=None, timeout=_BUSY_TIMEOUT_S, check_same_thread=False
        )
        self._conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL loses nothing when a process is killed (the WAL is in the page cache);
        # only a power cut could drop the last commits, which no trial simulates.
        self._conn.execute("PRAGMA synchronous=NORMAL")

    def _ddl(self) -> str:
        return DDL.format(real="REAL", bigint="INTEGER", serial="INTEGER PRIMARY KEY AUTOINCREMENT")

    def _tx(self) -> Tx:
        conn = self._conn

        def run(sql: str, params: Sequence[Any] = ()) -> Cursor:
            return conn.execute(sql, params)

        return run

    @contextmanager
    def _write(self) -> Iterator[Tx]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._tx()
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[Tx]:
        # One snapshot for the whole read, so a view is never torn between two commits.
        self._conn.execute("BEGIN")
        try:
            yield self._tx()
        finally:
            self._conn.execute("COMMIT")

    def close(self) -> None:
        # The last connection to close copies the WAL into the database: without its
        # fsync (a guard against a power cut, like the one NORMAL drops above), which
        # made that close 20 to 30 ms of every trial's teardown. The pages are written
        # all the same, so a kept ledger (``--keep-dirs``) reads back whole.
        with suppress(sqlite3.Error):
            self._conn.execute("PRAGMA synchronous=OFF")
        self._conn.close()
