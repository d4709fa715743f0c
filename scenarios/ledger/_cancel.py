"""The ledger's cancel requests: one row per job someone asked to cancel.

A cancel is a request, not a state of the job: the job's own row is left to its owner
(compare-and-set on its token, as every change of a job is), and a worker reads the
table before each effect it makes, so a cancel that arrives while an attempt is in
flight stops every attempt that starts after it (``cancel_in_flight``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scenarios.ledger._sql import Tx

CANCEL_DDL = """
CREATE TABLE IF NOT EXISTS cancels (
    job_id TEXT PRIMARY KEY,
    t_mono {real} NOT NULL
);
"""


class CancelStatements:
    def _write(self) -> AbstractContextManager[Tx]:
        raise NotImplementedError

    def _read(self) -> AbstractContextManager[Tx]:
        raise NotImplementedError

    def request_cancel(self, job_id: str, *, now: float) -> bool:
        with self._write() as tx:
            cur = tx(
                "INSERT INTO cancels (job_id, t_mono) VALUES (?, ?) "
                "ON CONFLICT (job_id) DO NOTHING",
                (job_id, now),
            )
            return cur.rowcount == 1

    def cancel_requested(self, job_id: str) -> bool:
        with self._read() as tx:
            row = tx("SELECT 1 FROM cancels WHERE job_id = ?", (job_id,)).fetchone()
            return row is not None
