"""The queue of a small third-party worker: one SQLite file in its state directory.

It knows nothing of crashpoint's Python code: it reads the ``CRASHPOINT_*`` environment
like any worker in any language would.

    jobs        one row per logical job: its state (queued, leased, done, dead, review),
                the lease (owner, fencing token, expiry), the writes sent, and whether
                the last one's outcome is unknown
    deliveries  one row per delivery of a job: enqueueing a job twice (an at-least-once
                redelivery) delivers it twice, but it stays one job
    cancels     one row per job someone cancelled (cancel.py); workers read it before
                each write

Every change of a leased job is a compare-and-set on its owner and token.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

FINAL = ("done", "dead", "review")

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'queued',
    owner TEXT,
    token INTEGER NOT NULL DEFAULT 0,
    lease_until REAL NOT NULL DEFAULT 0,
    sends INTEGER NOT NULL DEFAULT 0,
    unknown INTEGER NOT NULL DEFAULT 0,
    note TEXT
);
CREATE TABLE IF NOT EXISTS deliveries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    available_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS cancels (
    job_id TEXT PRIMARY KEY,
    at REAL NOT NULL
);
"""


def path() -> Path:
    return Path(os.environ.get("CRASHPOINT_STATE_DIR") or ".") / "queue.db"


def connect(*, create: bool = True) -> sqlite3.Connection:
    conn = sqlite3.connect(path(), timeout=10.0, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    if create:
        conn.executescript(SCHEMA)
    return conn


@dataclass
class Lease:
    job_id: str
    provider: str
    body: str
    token: int
    sends: int
    unknown: bool
    owner: str


def enqueue(
    conn: sqlite3.Connection, job_id: str, provider: str, body: str, *, unless_known: bool = False
) -> bool:
    """Deliver ``job_id``: a new job the first time, one more delivery every time, or, with
    ``unless_known``, none to a job it holds. Whether it was delivered. The look and the
    delivery are one transaction: two enqueues of a new job at once (a redelivery started
    while the first delivery's command still runs) must not both find it unknown."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if unless_known and known(conn, job_id):
            return False
        conn.execute(
            "INSERT OR IGNORE INTO jobs (job_id, provider, body) VALUES (?, ?, ?)",
            (job_id, provider, body),
        )
        conn.execute(
            "INSERT INTO deliveries (job_id, available_at) VALUES (?, ?)", (job_id, time.time())
        )
        conn.execute("COMMIT")
        return True
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def cancel(conn: sqlite3.Connection, job_id: str) -> None:
    """Record that ``job_id`` is cancelled; committed when this returns."""
    conn.execute("INSERT OR IGNORE INTO cancels (job_id, at) VALUES (?, ?)", (job_id, time.time()))


def cancelled(conn: sqlite3.Connection, job_id: str) -> bool:
    return conn.execute("SELECT 1 FROM cancels WHERE job_id = ?", (job_id,)).fetchone() is not None


def known(conn: sqlite3.Connection, job_id: str) -> bool:
    """Whether ``job_id`` was delivered before."""
    return conn.execute("SELECT 1 FROM jobs WHERE job_id = ?", (job_id,)).fetchone() is not None


def claim(conn: sqlite3.Connection, worker: str, lease_s: float) -> tuple[Lease | None, list[str]]:
    """Take the next delivery (or a job whose owner's lease ran out): the lease, if one was
    taken, and the jobs whose deliveries were consumed on the way.

    A delivery of a job that already ended is dropped; one of a job another worker holds
    under a live lease waits until that lease is up: that worker's attempt may be in
    flight, and nothing may be sent for the job until its outcome is known.
    """
    now = time.time()
    consumed: list[str] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        rows = conn.execute(
            "SELECT d.id, d.job_id, j.state, j.lease_until FROM deliveries d "
            "JOIN jobs j USING (job_id) WHERE d.available_at <= ? ORDER BY d.id",
            (now,),
        ).fetchall()
        for row in rows:
            consumed.append(row["job_id"])
            if row["state"] in FINAL:
                conn.execute("DELETE FROM deliveries WHERE id = ?", (row["id"],))
                continue
            if row["state"] == "leased" and row["lease_until"] > now:
                conn.execute(
                    "UPDATE deliveries SET available_at = ? WHERE id = ?",
                    (row["lease_until"], row["id"]),
                )
                continue
            conn.execute("DELETE FROM deliveries WHERE id = ?", (row["id"],))
            lease = _take(conn, row["job_id"], worker, now, lease_s)
            conn.execute("COMMIT")
            return lease, consumed
        stale = conn.execute(
            "SELECT job_id FROM jobs WHERE state = 'leased' AND lease_until <= ? LIMIT 1", (now,)
        ).fetchone()
        lease = _take(conn, stale["job_id"], worker, now, lease_s) if stale else None
        conn.execute("COMMIT")
        return lease, consumed
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _take(conn: sqlite3.Connection, job_id: str, worker: str, now: float, lease_s: float) -> Lease:
    conn.execute(
        "UPDATE jobs SET state = 'leased', owner = ?, token = token + 1, lease_until = ? "
        "WHERE job_id = ?",
        (worker, now + lease_s, job_id),
    )
    row = conn.execute("SELECT * FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    return Lease(
        row["job_id"],
        row["provider"],
        row["body"],
        row["token"],
        row["sends"],
        bool(row["unknown"]),
        worker,
    )


def update(conn: sqlite3.Connection, lease: Lease, lease_s: float, **changes: object) -> bool:
    """Renew the lease and apply ``changes`` while ``lease`` still owns the job."""
    sets = ", ".join(f"{k} = ?" for k in changes)
    sql = f"UPDATE jobs SET lease_until = ?{', ' if sets else ''}{sets} " + (
        "WHERE job_id = ? AND owner = ? AND token = ? AND state = 'leased'"
    )
    args = [time.time() + lease_s, *changes.values(), lease.job_id, lease.owner, lease.token]
    return conn.execute(sql, args).rowcount == 1


def requeue(conn: sqlite3.Connection, lease: Lease, delay_s: float) -> bool:
    """Give ``lease``'s job back to the queue, delivered again in ``delay_s``, while the
    lease still owns it: the next claim, by any worker, takes it up (a claim more)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        given = conn.execute(
            "UPDATE jobs SET state = 'queued', lease_until = 0 "
            "WHERE job_id = ? AND owner = ? AND token = ? AND state = 'leased'",
            (lease.job_id, lease.owner, lease.token),
        ).rowcount
        if given:
            conn.execute(
                "INSERT INTO deliveries (job_id, available_at) VALUES (?, ?)",
                (lease.job_id, time.time() + delay_s),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return given == 1


def status(job_id: str, *, count_claims: bool = False) -> dict[str, object]:
    """The job as crashpoint's status command reports it; its attempts are the writes it
    sent, or with ``count_claims`` how often it was claimed (its fencing token)."""
    if not path().exists():
        return {"state": "pending"}
    conn = connect(create=False)
    try:
        row = conn.execute("SELECT * FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    except sqlite3.OperationalError:
        row = None  # no table yet
    finally:
        conn.close()
    if row is None:
        return {"state": "pending"}
    state = {"done": "done", "dead": "dead_lettered", "review": "needs_review"}
    attempts = row["token"] if count_claims else row["sends"]
    out: dict[str, object] = {"state": state.get(row["state"], "pending"), "attempts": attempts}
    if row["note"]:
        out["last_error" if row["state"] != "done" else "external_ref"] = row["note"]
    return out
