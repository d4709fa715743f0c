"""The transactional outbox: the worker writes the intent, a relay sends it.

In outbox mode the worker does not call the provider: in the one transaction that closes
its attempt it writes an outbox row (the message and its id). A relay process sends each
pending row with the outbox id as the idempotency key and, in one transaction, marks the
row sent and the job acknowledged. A relay killed between the provider's answer and that
transaction sends the row again on restart; the key makes the provider replay it instead
of committing a second effect.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from scenarios.ledger.base import Claimed, OutboxRow

# `{real}` is filled per store, as in the main DDL.
OUTBOX_DDL = """
CREATE TABLE IF NOT EXISTS outbox (
    outbox_id TEXT PRIMARY KEY,
    job_id TEXT NOT NULL UNIQUE,
    provider TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    sends INTEGER NOT NULL DEFAULT 0,
    result_ref TEXT,
    created_at {real} NOT NULL,
    sent_at {real}
);
"""


class OutboxSql:
    """The outbox half of a ledger; the store supplies the transactions."""

    def _write(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _read(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def write_outbox(self, c: Claimed, *, outbox_id: str, now: float) -> bool:
        """Close the attempt by writing its message to the outbox, in one transaction
        with the job's state (compare-and-set on owner and token). The job stays
        unacknowledged, unleased and unclaimable until a relay has sent the row."""
        with self._write() as tx:
            cur = tx(
                "UPDATE jobs SET execution_state = 'succeeded', side_effect_state = 'submitted', "
                "idempotency_key = ?, owner = NULL, lease_expires_at = NULL, updated_at = ? "
                "WHERE job_id = ? AND owner = ? AND token = ?",
                (outbox_id, now, c.job_id, c.worker_id, c.token),
            )
            accepted = bool(cur.rowcount == 1)
            tx(
                "INSERT INTO result_writes (job_id, attempt, token, worker_id, outcome, "
                "accepted, t_mono) VALUES (?, ?, ?, ?, 'outboxed', ?, ?)",
                (c.job_id, c.attempt, c.token, c.worker_id, int(accepted), now),
            )
            if accepted:
                tx(
                    "INSERT INTO outbox (outbox_id, job_id, provider, body, created_at) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (outbox_id) DO NOTHING",
                    (outbox_id, c.job_id, c.provider, json.dumps(c.body, sort_keys=True), now),
                )
            return accepted

    def pending_outbox(self, *, limit: int = 16) -> Sequence[OutboxRow]:
        with self._read() as tx:
            rows = tx(
                "SELECT outbox_id, job_id, provider, body, state, sends, result_ref "
                "FROM outbox WHERE state = 'pending' ORDER BY created_at, outbox_id LIMIT ?",
                (limit,),
            ).fetchall()
        return [_row(r) for r in rows]

    def count_outbox_send(self, outbox_id: str) -> int:
        """Count a send before it leaves; returns the send's number (1 for the first)."""
        with self._write() as tx:
            tx("UPDATE outbox SET sends = sends + 1 WHERE outbox_id = ?", (outbox_id,))
            row = tx("SELECT sends FROM outbox WHERE outbox_id = ?", (outbox_id,)).fetchone()
        return int(row[0]) if row is not None else 0

    def mark_outbox_sent(self, outbox_id: str, *, result_ref: str | None, now: float) -> bool:
        """The provider took the message: the row is sent and its job acknowledged, in one
        transaction. False when the row was already sent."""
        with self._write() as tx:
            cur = tx(
                "UPDATE outbox SET state = 'sent', result_ref = ?, sent_at = ? "
                "WHERE outbox_id = ? AND state = 'pending'",
                (result_ref, now, outbox_id),
            )
            if cur.rowcount != 1:
                return False
            tx(
                "UPDATE jobs SET delivery_state = 'acknowledged', side_effect_state = 'confirmed', "
                "result_ref = ?, updated_at = ? "
                "WHERE job_id = (SELECT job_id FROM outbox WHERE outbox_id = ?)",
                (result_ref, now, outbox_id),
            )
            return True

    def outbox(self) -> Sequence[OutboxRow]:
        with self._read() as tx:
            rows = tx(
                "SELECT outbox_id, job_id, provider, body, state, sends, result_ref "
                "FROM outbox ORDER BY created_at, outbox_id"
            ).fetchall()
        return [_row(r) for r in rows]


def _row(r: Sequence[Any]) -> OutboxRow:
    outbox_id, job_id, provider, body, state, sends, ref = r
    return OutboxRow(outbox_id, job_id, provider, json.loads(body), state, int(sends), ref)
