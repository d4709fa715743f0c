"""The durable per-job record, in SQLite inside the trial's state directory.

``jobs`` holds one row per logical job: its document, where it is (``queued``, ``leased``,
``done``, ``dead``, ``review``), who owns it under which fencing token until when, and how
many times it was claimed. ``steps`` holds one row per job and provider: the key or
marker, persisted before the call, the writes sent so far (counted *before* each write,
so a crash never loses one) and the provider's id of the effect once confirmed.

Every change made on behalf of a claim is a compare-and-set on the owner and token, in a
``BEGIN IMMEDIATE`` transaction: a worker whose lease was taken over finds out at its next
step and writes nothing. WAL with ``synchronous=FULL``: a SIGKILL loses no commit.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FINAL = ("done", "dead", "review")
STATUS = {"done": "done", "review": "needs_review", "dead": "dead_lettered"}

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    doc TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'queued',
    owner TEXT,
    token INTEGER NOT NULL DEFAULT 0,
    lease_expires REAL NOT NULL DEFAULT 0,
    claims INTEGER NOT NULL DEFAULT 0,
    delivered_at REAL NOT NULL DEFAULT 0,
    must_reconcile INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS steps (
    job_id TEXT NOT NULL,
    provider TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'not_sent',
    sends INTEGER NOT NULL DEFAULT 0,
    ref TEXT,
    last_error TEXT,
    updated_at REAL NOT NULL,
    PRIMARY KEY (job_id, provider)
);
"""


@dataclass(frozen=True)
class Claim:
    job_id: str
    doc: dict[str, Any]
    worker: str
    token: int
    attempt: int
    must_reconcile: bool


@dataclass(frozen=True)
class Step:
    state: str  # not_sent | submitted | confirmed
    sends: int
    ref: str | None


class Record:
    """One connection to the record; one per thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = sqlite3.connect(path, timeout=30.0, isolation_level=None)
        self.db.execute("PRAGMA busy_timeout = 30000")
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = FULL")
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # -- the queue side --------------------------------------------------------------

    def reopen(self, job_id: str) -> None:
        """BUG rerun-on-ack-error: the job's end undone (its calls forgotten), as if the
        broker's acknowledgement, not this record, said whether the job ran."""
        now = time.time()
        with self.tx() as db:
            db.execute(
                "UPDATE jobs SET state = 'queued', owner = NULL, lease_expires = 0,"
                " updated_at = ? WHERE job_id = ?",
                (now, job_id),
            )
            db.execute("DELETE FROM steps WHERE job_id = ?", (job_id,))

    def add(self, job_id: str, doc: dict[str, Any]) -> bool:
        """Record a job (once: a job id seen before keeps its record); True if new."""
        now = time.time()
        with self.tx() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO jobs (job_id, doc, delivered_at, updated_at)"
                " VALUES (?, ?, ?, ?)",
                (job_id, json.dumps(doc), now, now),
            )
            return cur.rowcount == 1

    def claim(
        self, job_id: str, worker: str, ttl_s: float, next_token: Callable[[], int]
    ) -> Claim | str:
        """Take the job for ``ttl_s``, or say why not (finished, or leased to someone)."""
        with self.tx() as db:
            row = db.execute(
                "SELECT doc, state, owner, token, lease_expires, claims, must_reconcile"
                " FROM jobs WHERE job_id = ?",
                (job_id,),
            ).fetchone()
            if row is None:
                return "not in the record"
            doc, state, owner, token, expires, claims, must = row
            now = time.time()
            if state in FINAL:
                return f"already {state}"
            if state == "leased" and expires > now:
                return f"leased to {owner} (token {token}) for {expires - now:.2f} s more"
            # The token comes from the broker, which a restore of this file does not roll
            # back, so fencing tokens never repeat; max() covers a broker that was reset.
            token = max(int(token) + 1, next_token())
            db.execute(
                "UPDATE jobs SET state = 'leased', owner = ?, token = ?, lease_expires = ?,"
                " claims = claims + 1, updated_at = ? WHERE job_id = ?",
                (worker, token, now + ttl_s, now, job_id),
            )
            return Claim(job_id, json.loads(doc), worker, token, int(claims) + 1, bool(must))

    def _owned(self, db: sqlite3.Connection, c: Claim) -> bool:
        row = db.execute(
            "SELECT 1 FROM jobs WHERE job_id = ? AND owner = ? AND token = ? AND state = 'leased'",
            (c.job_id, c.worker, c.token),
        ).fetchone()
        return row is not None

    def renew(self, c: Claim, ttl_s: float) -> float | None:
        """Extend the lease while it is ours; the new expiry, or None if it was lost."""
        now = time.time()
        with self.tx() as db:
            cur = db.execute(
                "UPDATE jobs SET lease_expires = ? WHERE job_id = ? AND owner = ? AND token = ?"
                " AND state = 'leased'",
                (now + ttl_s, c.job_id, c.worker, c.token),
            )
            return now + ttl_s if cur.rowcount == 1 else None

    def finish(self, c: Claim, state: str, error: str | None = None) -> bool:
        with self.tx() as db:
            cur = db.execute(
                "UPDATE jobs SET state = ?, owner = NULL, lease_expires = 0, last_error ="
                " coalesce(?, last_error), updated_at = ? WHERE job_id = ? AND owner = ?"
                " AND token = ? AND state = 'leased'",
                (state, error, time.time(), c.job_id, c.worker, c.token),
            )
            return cur.rowcount == 1

    # -- one provider call -----------------------------------------------------------

    def step(self, job_id: str, provider: str) -> Step:
        row = self.db.execute(
            "SELECT state, sends, ref FROM steps WHERE job_id = ? AND provider = ?",
            (job_id, provider),
        ).fetchone()
        return Step("not_sent", 0, None) if row is None else Step(row[0], int(row[1]), row[2])

    def submit(self, c: Claim, provider: str, kind: str, key: str, sends: int) -> bool:
        """Persist the key and count one more write, before it is sent; False if not ours."""
        now = time.time()
        with self.tx() as db:
            if not self._owned(db, c):
                return False
            db.execute(
                "INSERT INTO steps (job_id, provider, kind, key, state, sends, updated_at)"
                " VALUES (?, ?, ?, ?, 'submitted', ?, ?) ON CONFLICT (job_id, provider) DO"
                " UPDATE SET key = excluded.key, state = 'submitted', sends = excluded.sends,"
                " updated_at = excluded.updated_at",
                (c.job_id, provider, kind, key, sends, now),
            )
            return True

    def confirm(self, c: Claim, provider: str, kind: str, key: str, ref: str | None) -> bool:
        now = time.time()
        with self.tx() as db:
            if not self._owned(db, c):
                return False
            db.execute(
                "INSERT INTO steps (job_id, provider, kind, key, state, ref, updated_at)"
                " VALUES (?, ?, ?, ?, 'confirmed', ?, ?) ON CONFLICT (job_id, provider) DO"
                " UPDATE SET state = 'confirmed', ref = excluded.ref,"
                " updated_at = excluded.updated_at",
                (c.job_id, provider, kind, key, ref, now),
            )
            return True

    def note(self, c: Claim, provider: str, error: str) -> None:
        """Remember the last error of a step (for ``status``); harmless if not ours."""
        self.db.execute(
            "UPDATE steps SET last_error = ? WHERE job_id = ? AND provider = ?",
            (error, c.job_id, provider),
        )
        self.db.execute(
            "UPDATE jobs SET last_error = ? WHERE job_id = ? AND owner = ? AND token = ?",
            (f"{provider}: {error}", c.job_id, c.worker, c.token),
        )

    # -- redelivery and recovery -----------------------------------------------------

    def due(self, ttl_s: float) -> list[tuple[str, dict[str, Any]]]:
        """Unfinished jobs nobody holds and nobody was handed for a lease: deliver again.

        Claims them for delivery (``delivered_at``) in one transaction, so of several
        workers looking at once exactly one redelivers each job.
        """
        now = time.time()
        where = (
            "state IN ('queued', 'leased') AND lease_expires <= ? AND delivered_at <= ?",
            (now, now - ttl_s),
        )
        if self.db.execute(f"SELECT 1 FROM jobs WHERE {where[0]} LIMIT 1", where[1]).fetchone():
            with self.tx() as db:
                rows = db.execute(f"SELECT job_id, doc FROM jobs WHERE {where[0]}", where[1])
                found = [(job, json.loads(doc)) for job, doc in rows.fetchall()]
                db.executemany(
                    "UPDATE jobs SET delivered_at = ? WHERE job_id = ?",
                    [(now, job) for job, _ in found],
                )
                return found
        return []

    def recover(self) -> int:
        """After a restore: every unfinished job reconciles each call before any write,
        and is delivered again at once (its message may be long gone)."""
        with self.tx() as db:
            cur = db.execute(
                "UPDATE jobs SET must_reconcile = 1, delivered_at = 0"
                " WHERE state NOT IN ('done', 'dead', 'review')"
            )
            return cur.rowcount


def status(path: Path, job_id: str) -> dict[str, Any]:
    """The job's end state for ``status.py``; ``pending`` for a job never seen."""
    if not path.exists():
        return {"state": "pending"}
    db = sqlite3.connect(path, timeout=30.0)
    try:
        db.execute("PRAGMA busy_timeout = 30000")
        try:
            row = db.execute(
                "SELECT state, claims, last_error, doc FROM jobs WHERE job_id = ?", (job_id,)
            ).fetchone()
        except sqlite3.OperationalError:  # no table yet: nothing was ever enqueued
            return {"state": "pending"}
        if row is None:
            return {"state": "pending"}
        state, claims, last_error, doc = row
        provider = json.loads(doc).get("provider")
        out: dict[str, Any] = {"state": STATUS.get(state, "pending"), "attempts": int(claims)}
        # The effect at the job's own provider (the one the harness faults) comes first.
        ref = db.execute(
            "SELECT ref FROM steps WHERE job_id = ? AND state = 'confirmed' AND ref IS NOT NULL"
            " ORDER BY provider = ? DESC LIMIT 1",
            (job_id, str(provider)),
        ).fetchone()
        if ref is not None:
            out["external_ref"] = str(ref[0])
        if last_error:
            out["last_error"] = str(last_error)
        return out
    finally:
        db.close()
