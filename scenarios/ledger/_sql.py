"""The ledger's statements, shared by both stores.

Each store supplies a connection, a write transaction (``BEGIN IMMEDIATE`` on SQLite, an
ordinary transaction plus ``FOR UPDATE SKIP LOCKED`` on PostgreSQL) and its DDL types;
everything else is the same SQL, so the two stores cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from harness.contract.errors import LedgerError
from scenarios.ledger._cancel import CANCEL_DDL, CancelStatements
from scenarios.ledger._outbox import OUTBOX_DDL, OutboxSql
from scenarios.ledger._steps import StepStatements
from scenarios.ledger.base import (
    STATE_TABLES,
    Claimed,
    ClaimRow,
    Dump,
    JobRow,
    ReconcileRow,
    ResultWriteRow,
)

# `{real}`, `{serial}` and `{bigint}` are filled per store.
DDL = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    body TEXT NOT NULL,
    delivery_state TEXT NOT NULL DEFAULT 'queued',
    execution_state TEXT NOT NULL DEFAULT 'not_started',
    side_effect_state TEXT NOT NULL DEFAULT 'not_attempted',
    needs_review INTEGER NOT NULL DEFAULT 0,
    review_reason TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    idempotency_key TEXT,
    client_marker TEXT,
    token {bigint} NOT NULL DEFAULT 0,
    owner TEXT,
    lease_expires_at {real},
    next_run_at {real} NOT NULL DEFAULT 0,
    result_ref TEXT,
    last_error TEXT,
    enqueued_at {real} NOT NULL,
    updated_at {real} NOT NULL,
    steps TEXT
);
CREATE INDEX IF NOT EXISTS jobs_runnable ON jobs (delivery_state, next_run_at);
CREATE TABLE IF NOT EXISTS attempts (
    job_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    worker_id TEXT NOT NULL,
    token {bigint} NOT NULL,
    delivery_state TEXT NOT NULL,
    execution_state TEXT NOT NULL,
    side_effect_state TEXT NOT NULL,
    started_at {real} NOT NULL,
    updated_at {real} NOT NULL,
    PRIMARY KEY (job_id, attempt)
);
CREATE TABLE IF NOT EXISTS effects (
    idempotency_key TEXT PRIMARY KEY,
    job_id TEXT NOT NULL,
    client_marker TEXT,
    state TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    token {bigint} NOT NULL,
    result_ref TEXT,
    updated_at {real} NOT NULL
);
CREATE TABLE IF NOT EXISTS reconcile_queue (
    job_id TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    tries INTEGER NOT NULL DEFAULT 0,
    next_at {real} NOT NULL,
    enqueued_at {real} NOT NULL
);
CREATE TABLE IF NOT EXISTS job_steps (
    job_id TEXT NOT NULL,
    step TEXT NOT NULL,
    state TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    token {bigint} NOT NULL,
    result_ref TEXT,
    updated_at {real} NOT NULL,
    PRIMARY KEY (job_id, step)
);
CREATE TABLE IF NOT EXISTS claims (
    id {serial},
    job_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    token {bigint} NOT NULL,
    worker_id TEXT NOT NULL,
    t_mono {real} NOT NULL,
    lease_expires_at {real} NOT NULL
);
CREATE TABLE IF NOT EXISTS result_writes (
    id {serial},
    job_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    token {bigint} NOT NULL,
    worker_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    accepted INTEGER NOT NULL,
    t_mono {real} NOT NULL
);
CREATE TABLE IF NOT EXISTS reconciles (
    id {serial},
    job_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    t_mono {real} NOT NULL
);
"""

# The outbox's table is created with the rest: its rows are written in the job's own
# transactions (scenarios/ledger/_outbox.py).
DDL += OUTBOX_DDL
# Cancel requests outlive a restore as they outlive a crash: they are not job state.
DDL += CANCEL_DDL

_CLAIMABLE = """
SELECT job_id, provider, body, attempts, token, execution_state, side_effect_state,
       idempotency_key, last_error, steps
FROM jobs
WHERE needs_review = 0
  AND ((delivery_state = 'queued' AND next_run_at <= ?)
       OR (delivery_state = 'leased' AND lease_expires_at < ?))
ORDER BY next_run_at, job_id
LIMIT 1
"""

_JOB_COLUMNS = (
    "job_id, provider, delivery_state, execution_state, side_effect_state, needs_review, "
    "attempts, idempotency_key, token, owner, lease_expires_at, client_marker, result_ref, "
    "review_reason, last_error"
)

# Column assignments per outcome of a result write (fixed text; values are bound).
_OUTCOME_SET: Mapping[str, str] = {
    "succeeded": "delivery_state = 'acknowledged', execution_state = 'succeeded', "
    "side_effect_state = 'confirmed', lease_expires_at = NULL, "
    # A job closed again after a lost acknowledgement keeps the reference it had.
    "result_ref = COALESCE(?, result_ref)",
    "unknown": "execution_state = 'unknown', side_effect_state = 'ambiguous', last_error = ?",
    "needs_review": "needs_review = 1, review_reason = ?, delivery_state = 'queued', "
    "owner = NULL, lease_expires_at = NULL, execution_state = 'unknown', "
    "side_effect_state = CASE WHEN side_effect_state = 'submitted' THEN 'ambiguous' "
    "ELSE side_effect_state END",
    # `failed` and `retry` are requeued (or dead-lettered) by the same assignment; the
    # attempt left nothing at the provider, so the side effect goes back to not_attempted.
    "failed": "delivery_state = ?, next_run_at = ?, execution_state = 'failed', "
    "side_effect_state = 'not_attempted', owner = NULL, lease_expires_at = NULL, last_error = ?",
}
_OUTCOME_SET = {**_OUTCOME_SET, "retry": _OUTCOME_SET["failed"]}
_EFFECT_STATE = {
    "succeeded": "confirmed",
    "unknown": "ambiguous",
    "needs_review": "ambiguous",
    "failed": "failed",
    "retry": "not_found",
}
OUTCOMES = tuple(_OUTCOME_SET)


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


class Tx(Protocol):
    def __call__(self, sql: str, params: Sequence[Any] = (), /) -> Cursor: ...


class SqlLedger(OutboxSql, StepStatements, CancelStatements):
    """The store-independent half of a ledger; subclasses open the connection."""

    #: Appended to the claim query: PostgreSQL skips rows other claimers hold.
    lock_clause = ""

    def _write(self) -> AbstractContextManager[Tx]:
        raise NotImplementedError

    def _read(self) -> AbstractContextManager[Tx]:
        raise NotImplementedError

    def _ddl(self) -> str:
        raise NotImplementedError

    # -- setup ------------------------------------------------------------------

    def setup(self) -> None:
        with self._write() as tx:
            for stmt in self._ddl().split(";"):
                if stmt.strip():
                    tx(stmt)

    # -- the job path -------------------------------------------------------------

    def enqueue(
        self,
        job_id: str,
        provider: str,
        body: Mapping[str, Any],
        *,
        now: float,
        steps: Sequence[tuple[str, str]] = (),
    ) -> bool:
        plan = json.dumps([list(s) for s in steps]) if steps else None
        with self._write() as tx:
            cur = tx(
                "INSERT INTO jobs (job_id, provider, body, enqueued_at, updated_at, steps) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (job_id) DO NOTHING",
                (job_id, provider, json.dumps(dict(body), sort_keys=True), now, now, plan),
            )
            return cur.rowcount == 1

    def claim(
        self, worker_id: str, *, now: float, ttl_s: float, max_attempts: int | None
    ) -> Claimed | None:
        with self._write() as tx:
            while True:
                row = tx(_CLAIMABLE + self.lock_clause, (now, now)).fetchone()
                if row is None:
                    return None
                job_id, provider, body, attempts, token, ex, se, key, last_error, plan = row
                if max_attempts is not None and attempts >= max_attempts:
                    self._dead_letter_exhausted(tx, job_id, now)
                    continue
                attempt, token = attempts + 1, token + 1
                expires = now + ttl_s
                tx(
                    "UPDATE jobs SET delivery_state = 'leased', execution_state = 'running', "
                    "owner = ?, token = ?, attempts = ?, lease_expires_at = ?, updated_at = ? "
                    "WHERE job_id = ?",
                    (worker_id, token, attempt, expires, now, job_id),
                )
                tx(
                    "INSERT INTO attempts (job_id, attempt, worker_id, token, delivery_state, "
                    "execution_state, side_effect_state, started_at, updated_at) "
                    "VALUES (?, ?, ?, ?, 'leased', 'running', ?, ?, ?)",
                    (job_id, attempt, worker_id, token, se, now, now),
                )
                tx(
                    "INSERT INTO claims (job_id, attempt, token, worker_id, t_mono, "
                    "lease_expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (job_id, attempt, token, worker_id, now, expires),
                )
                queued = tx("SELECT 1 FROM reconcile_queue WHERE job_id = ?", (job_id,))
                needs_reconcile = queued.fetchone() is not None
                return Claimed(
                    job_id=job_id,
                    provider=provider,
                    body=json.loads(body),
                    attempt=attempt,
                    token=token,
                    worker_id=worker_id,
                    lease_expires_at=expires,
                    execution_state=ex,
                    side_effect_state=se,
                    needs_reconcile=needs_reconcile,
                    idempotency_key=key,
                    last_error=last_error,
                    steps=tuple((str(n), str(p)) for n, p in json.loads(plan or "[]")),
                    steps_done=self._steps_done(tx, job_id),
                )

    def _dead_letter_exhausted(self, tx: Tx, job_id: str, now: float) -> None:
        # Out of attempts. If the last one left its call unresolved, a human must look:
        # dead-lettering it silently would hide a possible effect.
        tx(
            "UPDATE jobs SET delivery_state = 'dead_lettered', owner = NULL, "
            "lease_expires_at = NULL, updated_at = ?, "
            "needs_review = CASE WHEN side_effect_state IN ('submitted', 'ambiguous') "
            "OR job_id IN (SELECT job_id FROM reconcile_queue) THEN 1 ELSE 0 END "
            "WHERE job_id = ?",
            (now, job_id),
        )

    def renew(
        self, c: Claimed, *, now: float, ttl_s: float, check_owner: bool = True
    ) -> float | None:
        expires = now + ttl_s
        with self._write() as tx:
            if check_owner:
                cur = tx(
                    "UPDATE jobs SET lease_expires_at = ? WHERE job_id = ? AND owner = ? "
                    "AND token = ? AND lease_expires_at > ?",
                    (expires, c.job_id, c.worker_id, c.token, now),
                )
            else:
                cur = tx(
                    "UPDATE jobs SET lease_expires_at = ?, owner = ?, token = ? WHERE job_id = ?",
                    (expires, c.worker_id, c.token, c.job_id),
                )
            return expires if cur.rowcount == 1 else None

    def acknowledge(self, c: Claimed, *, now: float) -> bool:
        with self._write() as tx:
            cur = tx(
                "UPDATE jobs SET delivery_state = 'acknowledged', updated_at = ? "
                "WHERE job_id = ? AND owner = ? AND token = ?",
                (now, c.job_id, c.worker_id, c.token),
            )
            return cur.rowcount == 1

    def mark_submitted(self, c: Claimed, *, key: str, marker: str | None, now: float) -> bool:
        with self._write() as tx:
            cur = tx(
                "UPDATE jobs SET side_effect_state = 'submitted', execution_state = 'running', "
                "idempotency_key = ?, client_marker = ?, updated_at = ? "
                "WHERE job_id = ? AND owner = ? AND token = ?",
                (key, marker, now, c.job_id, c.worker_id, c.token),
            )
            if cur.rowcount != 1:
                return False
            cur = tx(
                "INSERT INTO effects (idempotency_key, job_id, client_marker, state, attempt, "
                "token, updated_at) VALUES (?, ?, ?, 'submitted', ?, ?, ?) "
                "ON CONFLICT (idempotency_key) DO UPDATE SET state = 'submitted', "
                "attempt = excluded.attempt, token = excluded.token, "
                "updated_at = excluded.updated_at WHERE effects.job_id = excluded.job_id",
                (key, c.job_id, marker, c.attempt, c.token, now),
            )
            if cur.rowcount != 1:
                raise LedgerError(
                    f"idempotency key {key!r} of job {c.job_id!r} already belongs to another "
                    f"job; derive keys from the job id so they cannot collide"
                )
            tx("DELETE FROM reconcile_queue WHERE job_id = ?", (c.job_id,))
            self._attempt_states(tx, c, now)
            return True

    def write_result(
        self,
        c: Claimed,
        outcome: str,
        *,
        now: float,
        cas: bool = True,
        result_ref: str | None = None,
        retry_at: float | None = None,
        reason: str | None = None,
    ) -> bool:
        if outcome not in _OUTCOME_SET:
            raise ValueError(f"outcome={outcome!r} is unknown; use one of {', '.join(OUTCOMES)}")
        params: tuple[Any, ...]
        if outcome == "succeeded":
            params = (result_ref,)
        elif outcome in ("unknown", "needs_review"):
            params = (reason,)
        else:
            delivery = "dead_lettered" if retry_at is None else "queued"
            params = (delivery, retry_at or 0.0, reason)
        where = "job_id = ? AND owner = ? AND token = ?" if cas else "job_id = ?"
        keys: tuple[Any, ...] = (c.job_id, c.worker_id, c.token) if cas else (c.job_id,)
        with self._write() as tx:
            cur = tx(
                f"UPDATE jobs SET {_OUTCOME_SET[outcome]}, updated_at = ? WHERE {where}",
                (*params, now, *keys),
            )
            accepted = cur.rowcount == 1
            tx(
                "INSERT INTO result_writes (job_id, attempt, token, worker_id, outcome, "
                "accepted, t_mono) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (c.job_id, c.attempt, c.token, c.worker_id, outcome, int(accepted), now),
            )
            if not accepted:
                return False
            if outcome == "unknown":
                tx(
                    "INSERT INTO reconcile_queue (job_id, reason, tries, next_at, enqueued_at) "
                    "VALUES (?, ?, 0, ?, ?) ON CONFLICT (job_id) DO NOTHING",
                    (c.job_id, reason or "unknown", now, now),
                )
            elif outcome in ("succeeded", "retry", "failed"):
                tx("DELETE FROM reconcile_queue WHERE job_id = ?", (c.job_id,))
            tx(
                "UPDATE effects SET state = ?, result_ref = COALESCE(?, result_ref), "
                "updated_at = ? WHERE idempotency_key = "
                "(SELECT idempotency_key FROM jobs WHERE job_id = ?)",
                (_EFFECT_STATE[outcome], result_ref, now, c.job_id),
            )
            self._attempt_states(tx, c, now)
            return True

    def _attempt_states(self, tx: Tx, c: Claimed, now: float) -> None:
        tx(
            "UPDATE attempts SET delivery_state = j.delivery_state, "
            "execution_state = j.execution_state, side_effect_state = j.side_effect_state, "
            "updated_at = ? FROM (SELECT delivery_state, execution_state, side_effect_state "
            "FROM jobs WHERE job_id = ?) AS j WHERE attempts.job_id = ? AND attempts.attempt = ?",
            (now, c.job_id, c.job_id, c.attempt),
        )

    def record_reconcile(self, c: Claimed, outcome: str, *, now: float, next_at: float) -> None:
        with self._write() as tx:
            tx(
                "INSERT INTO reconciles (job_id, attempt, outcome, t_mono) VALUES (?, ?, ?, ?)",
                (c.job_id, c.attempt, outcome, now),
            )
            tx(
                "UPDATE reconcile_queue SET tries = tries + 1, next_at = ? WHERE job_id = ?",
                (next_at, c.job_id),
            )

    def mark_recovery(self, *, now: float) -> int:
        with self._write() as tx:
            cur = tx(
                "INSERT INTO reconcile_queue (job_id, reason, tries, next_at, enqueued_at) "
                "SELECT job_id, 'recovery', 0, ?, ? FROM jobs WHERE needs_review = 0 "
                "AND delivery_state IN ('queued', 'leased') ON CONFLICT (job_id) DO NOTHING",
                (now, now),
            )
            return max(cur.rowcount, 0)

    # -- reads --------------------------------------------------------------------

    def jobs(self) -> Sequence[JobRow]:
        with self._read() as tx:
            rows = tx(f"SELECT {_JOB_COLUMNS} FROM jobs ORDER BY job_id").fetchall()
        return [_job_row(r) for r in rows]

    def claims(self) -> Sequence[ClaimRow]:
        with self._read() as tx:
            rows = tx(
                "SELECT job_id, attempt, token, worker_id, t_mono, lease_expires_at "
                "FROM claims ORDER BY id"
            ).fetchall()
        return [ClaimRow(*r) for r in rows]

    def result_writes(self) -> Sequence[ResultWriteRow]:
        with self._read() as tx:
            rows = tx(
                "SELECT job_id, attempt, token, worker_id, accepted, t_mono, outcome "
                "FROM result_writes ORDER BY id"
            ).fetchall()
        return [ResultWriteRow(a, b, c, d, bool(e), f, g) for a, b, c, d, e, f, g in rows]

    def reconciles(self) -> Sequence[ReconcileRow]:
        with self._read() as tx:
            rows = tx("SELECT job_id, attempt, outcome, t_mono FROM reconciles ORDER BY id")
            return [ReconcileRow(*r) for r in rows.fetchall()]

    # -- snapshot and restore -------------------------------------------------------

    def dump(self) -> Dump:
        tables = {}
        with self._read() as tx:
            for name in STATE_TABLES:
                cur = tx(f"SELECT * FROM {name}")
                rows = tuple(tuple(r) for r in cur.fetchall())
                tables[name] = (_columns(cur), rows)
        return Dump(tables)

    def load(self, dump: Dump) -> None:
        with self._write() as tx:
            # A restored store must not hand out a fencing token or attempt number twice:
            # a stale worker holding token N would look current again.
            counters = {
                r[0]: (r[1], r[2])
                for r in tx("SELECT job_id, token, attempts FROM jobs").fetchall()
            }
            for name in STATE_TABLES:
                tx(f"DELETE FROM {name}")
            for name, (columns, rows) in dump.tables.items():
                if name not in STATE_TABLES:
                    raise LedgerError(f"snapshot table {name!r} is not a ledger state table")
                for row in _keep_counters(name, columns, rows, counters):
                    marks = ", ".join("?" for _ in columns)
                    tx(f"INSERT INTO {name} ({', '.join(columns)}) VALUES ({marks})", row)


def _keep_counters(
    name: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    counters: Mapping[str, tuple[int, int]],
) -> Iterator[Sequence[Any]]:
    if name != "jobs":
        yield from rows
        return
    i_job, i_tok, i_att = (columns.index(c) for c in ("job_id", "token", "attempts"))
    for row in rows:
        out = list(row)
        token, attempts = counters.get(out[i_job], (0, 0))
        out[i_tok] = max(out[i_tok], token)
        out[i_att] = max(out[i_att], attempts)
        yield out


def _columns(cur: Any) -> tuple[str, ...]:
    return tuple(d[0] for d in cur.description)


def _job_row(r: Sequence[Any]) -> JobRow:
    (job_id, provider, de, ex, se, review, attempts, key, token, owner, lease, marker, ref) = r[:13]
    return JobRow(
        job_id=job_id,
        provider=provider,
        delivery_state=de,
        execution_state=ex,
        side_effect_state=se,
        needs_review=bool(review),
        attempts=attempts,
        idempotency_key=key,
        token=token,
        owner=owner,
        lease_expires_at=lease,
        client_marker=marker,
        result_ref=ref,
        review_reason=r[13],
        last_error=r[14],
    )
