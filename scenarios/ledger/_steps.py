"""The ledger's statements for multi-step jobs and for a lost acknowledgement.

A multi-step job keeps one row per confirmed step in ``job_steps``; the job's own
columns (key, marker, side effect state) always describe the step in progress, so the
single-step protocol (persist ``submitted`` first, reconcile what is unknown) runs
unchanged for each step in turn.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scenarios.ledger._sql import Tx
    from scenarios.ledger.base import Claimed


class StepStatements:
    def _write(self) -> AbstractContextManager[Tx]:
        raise NotImplementedError

    @staticmethod
    def _steps_done(tx: Tx, job_id: str) -> frozenset[str]:
        rows = tx(
            "SELECT step FROM job_steps WHERE job_id = ? AND state = 'confirmed'", (job_id,)
        ).fetchall()
        return frozenset(str(r[0]) for r in rows)

    def complete_step(self, c: Claimed, step: str, *, result_ref: str | None, now: float) -> bool:
        with self._write() as tx:
            cur = tx(
                "UPDATE jobs SET side_effect_state = 'not_attempted', updated_at = ? "
                "WHERE job_id = ? AND owner = ? AND token = ?",
                (now, c.job_id, c.worker_id, c.token),
            )
            if cur.rowcount != 1:
                return False
            tx(
                "INSERT INTO job_steps (job_id, step, state, attempt, token, result_ref, "
                "updated_at) VALUES (?, ?, 'confirmed', ?, ?, ?, ?) "
                "ON CONFLICT (job_id, step) DO UPDATE SET state = 'confirmed', "
                "result_ref = excluded.result_ref, updated_at = excluded.updated_at",
                (c.job_id, step, c.attempt, c.token, result_ref, now),
            )
            tx(
                "UPDATE effects SET state = 'confirmed', result_ref = COALESCE(?, result_ref), "
                "updated_at = ? WHERE idempotency_key = "
                "(SELECT idempotency_key FROM jobs WHERE job_id = ?)",
                (result_ref, now, c.job_id),
            )
            tx("DELETE FROM reconcile_queue WHERE job_id = ?", (c.job_id,))
            return True

    def redeliver(self, job_id: str, *, now: float) -> bool:
        with self._write() as tx:
            cur = tx(
                "UPDATE jobs SET delivery_state = 'queued', next_run_at = 0, owner = NULL, "
                "lease_expires_at = NULL, updated_at = ? "
                "WHERE job_id = ? AND delivery_state = 'acknowledged'",
                (now, job_id),
            )
            return cur.rowcount == 1
