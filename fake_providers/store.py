"""The durable effect log: arrivals, effects and idempotency keys in one SQLite file.

WAL with ``synchronous=FULL`` and a commit before every response: whatever a client
was told (201) survives a SIGKILL of the provider. One connection behind one lock keeps
the idempotency-key check and the effect insert atomic without relying on SQLite's
busy handling; the fake never needs more throughput than that gives.

Bookkeeping that acknowledges nothing (recording an arrival, reserving a key, noting a
fault) commits with ``synchronous=NORMAL``: in WAL mode that is still durable against a
process kill, and the next FULL commit fsyncs the WAL, those frames included. It saves
two of the three fsyncs a write would otherwise cost (fsync dominates a write's time).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS arrivals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    t_mono REAL NOT NULL,
    t_wall REAL NOT NULL,
    provider TEXT NOT NULL,
    kind TEXT NOT NULL,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    job_id TEXT,
    idempotency_key TEXT,
    client_marker TEXT,
    fingerprint TEXT,
    fencing_token TEXT,
    worker_id TEXT,
    peer_pid INTEGER,
    status INTEGER,
    committed INTEGER NOT NULL DEFAULT 0,
    replayed INTEGER NOT NULL DEFAULT 0,
    effect_id INTEGER,
    fault TEXT,
    identity TEXT
);
CREATE INDEX IF NOT EXISTS arrivals_by_key ON arrivals (idempotency_key);
CREATE INDEX IF NOT EXISTS arrivals_by_marker ON arrivals (client_marker);
CREATE TABLE IF NOT EXISTS effects (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    provider TEXT NOT NULL,
    job_id TEXT,
    idempotency_key TEXT,
    client_marker TEXT,
    fingerprint TEXT NOT NULL,
    arrival_id INTEGER NOT NULL,
    t_mono REAL NOT NULL,
    t_wall REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS effects_by_marker ON effects (client_marker);
CREATE TABLE IF NOT EXISTS releases (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    provider TEXT NOT NULL,
    arrival_id INTEGER NOT NULL,
    fault_id TEXT NOT NULL,
    action TEXT NOT NULL,
    job_id TEXT,
    outcome TEXT NOT NULL,
    released_by TEXT NOT NULL,
    t_mono REAL NOT NULL,
    t_wall REAL NOT NULL
);
-- What a persona's committed write created, in the vendor's shape: what a retrieve,
-- a list or a search returns. One per effect, written in the effect's transaction.
CREATE TABLE IF NOT EXISTS objects (
    effect_id INTEGER PRIMARY KEY,
    object_id TEXT NOT NULL UNIQUE,
    resource TEXT NOT NULL,
    job_id TEXT,
    client_marker TEXT,
    body TEXT NOT NULL,
    t_wall REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    key TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('in_flight', 'completed')),
    created_wall REAL NOT NULL,
    status INTEGER,
    body BLOB,
    effect_id INTEGER
);
"""

_ARRIVAL_COLUMNS = (
    "id, t_mono, t_wall, provider, kind, method, path, job_id, idempotency_key, "
    "client_marker, fingerprint, fencing_token, worker_id, peer_pid, status, committed, "
    "replayed, effect_id, fault, identity"
)
_RELEASE_COLUMNS = (
    "id, provider, arrival_id, fault_id, action, job_id, outcome, released_by, t_mono, t_wall"
)
_EFFECT_COLUMNS = (
    "id, provider, job_id, idempotency_key, client_marker, fingerprint, arrival_id, t_mono, t_wall"
)


def external_id(provider: str, effect_id: int) -> str:
    """The record id the provider gives an effect, as a real API would (``rec_...``).

    Derived from the provider's name and the effect's row id rather than stored: it is
    unique within a trial (one provider per name), the same on every read, and the old
    effect logs need no new column.
    """
    return f"rec_{provider}_{effect_id:06d}"


@dataclass(frozen=True)
class ArrivalIn:
    """What is known about a request when it arrives."""

    kind: str
    method: str
    path: str
    job_id: str | None = None
    idempotency_key: str | None = None
    client_marker: str | None = None
    fingerprint: str | None = None
    fencing_token: str | None = None
    worker_id: str | None = None
    peer_pid: int | None = None
    #: Known on arrival only when the provider refuses the request outright.
    status: int | None = None
    #: The identity the request was made under (``X-Crashpoint-Identity``).
    identity: str | None = None


@dataclass(frozen=True)
class KeyDecision:
    """What to do with a write carrying an idempotency key.

    ``outcome`` is ``new`` (reserved, now in flight), ``replay`` (``status`` and ``body``
    are the stored response), ``in_flight`` or ``mismatch``.
    """

    outcome: str
    status: int = 0
    body: bytes = b""


@dataclass(frozen=True)
class KeyState:
    state: str
    status: int | None
    body: bytes | None


class Store:
    """The provider's SQLite file. Every method is one transaction and thread safe."""

    def __init__(
        self,
        path: Path | str,
        *,
        provider: str,
        key_ttl_s: float = 86400.0,
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self.provider = provider
        self.key_ttl_s = key_ttl_s
        self._wall = wall
        self._mono = mono
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        with self._lock:
            self._db.executescript(_SCHEMA)
            # A key left in flight belongs to a request that died with a previous process;
            # nothing was committed for it, so the key is free again.
            self._db.execute("DELETE FROM idempotency_keys WHERE state = 'in_flight'")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def wipe(self) -> None:
        """Forget every arrival, effect and key, and number them from 1 again: the log
        of a fresh start. Durable against a kill, as any bookkeeping (see the module)."""
        with self._bookkeeping():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for table in ("arrivals", "effects", "idempotency_keys", "releases", "objects"):
                    self._db.execute(f"DELETE FROM {table}")
                # AUTOINCREMENT keeps its high-water marks here; a fresh file has none.
                self._db.execute("DELETE FROM sqlite_sequence")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    @contextmanager
    def _bookkeeping(self) -> Iterator[None]:
        """Hold the lock and commit without fsync: for writes that acknowledge nothing."""
        with self._lock:
            self._db.execute("PRAGMA synchronous=NORMAL")
            try:
                yield
            finally:
                self._db.execute("PRAGMA synchronous=FULL")

    # -- arrivals -------------------------------------------------------------------

    def record_arrival(self, a: ArrivalIn) -> int:
        with self._bookkeeping():
            cur = self._db.execute(
                "INSERT INTO arrivals (t_mono, t_wall, provider, kind, method, path, job_id,"
                " idempotency_key, client_marker, fingerprint, fencing_token, worker_id,"
                " peer_pid, status, identity) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    self._mono(),
                    self._wall(),
                    self.provider,
                    a.kind,
                    a.method,
                    a.path,
                    a.job_id,
                    a.idempotency_key,
                    a.client_marker,
                    a.fingerprint,
                    a.fencing_token,
                    a.worker_id,
                    a.peer_pid,
                    a.status,
                    a.identity,
                ),
            )
            return int(cur.lastrowid or 0)

    def finish_arrival(
        self,
        arrival_id: int,
        *,
        status: int | None,
        replayed: bool = False,
        fault: str | None = None,
    ) -> None:
        """Record how a request ended; ``committed``/``effect_id`` are set by the commit."""
        with self._bookkeeping():
            self._db.execute(
                "UPDATE arrivals SET status = ?, replayed = ?, fault = COALESCE(?, fault)"
                " WHERE id = ?",
                (status, int(replayed), fault, arrival_id),
            )

    def mark_fault(self, arrival_id: int, fault: str) -> None:
        with self._bookkeeping():
            self._db.execute("UPDATE arrivals SET fault = ? WHERE id = ?", (fault, arrival_id))

    def job_of(self, column: str, value: str) -> str | None:
        """The job of the first write that carried this key or marker, for lookup arrivals."""
        if column not in ("idempotency_key", "client_marker"):
            raise ValueError(f"column={column!r} is not a lookup column")
        with self._lock:
            row = self._db.execute(
                f"SELECT job_id FROM arrivals WHERE {column} = ? AND kind = 'write'"
                " AND job_id IS NOT NULL ORDER BY id LIMIT 1",
                (value,),
            ).fetchone()
        return None if row is None else str(row[0])

    def arrivals(self, *, after: int = 0) -> list[dict[str, Any]]:
        """Arrivals with ``id > after``, in arrival order (``after`` pages a growing log)."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_ARRIVAL_COLUMNS} FROM arrivals WHERE id > ? ORDER BY id", (after,)
            )
            names = [d[0] for d in rows.description]
            out = [dict(zip(names, r, strict=True)) for r in rows.fetchall()]
        for a in out:
            a["committed"] = bool(a["committed"])
            a["replayed"] = bool(a["replayed"])
        return out

    # -- effects --------------------------------------------------------------------

    def commit_effect(
        self,
        *,
        arrival_id: int,
        job_id: str | None,
        fingerprint: str,
        key: str | None = None,
        marker: str | None = None,
        respond: Callable[[dict[str, Any]], tuple[int, bytes]],
        keep: Callable[[dict[str, Any]], tuple[str, str, str]] | None = None,
    ) -> tuple[int, int, bytes]:
        """Insert the effect, complete its key and mark its arrival, in one transaction.

        ``respond`` builds the response from the new effect row, so the stored (and
        later replayed) bytes are exactly the ones sent. ``keep`` (a persona's) gives the
        vendor object the write created, ``(object_id, resource, json)``, stored with the
        effect. Returns (effect_id, status, body).
        """
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                t_mono, t_wall = self._mono(), self._wall()
                cur = self._db.execute(
                    "INSERT INTO effects (provider, job_id, idempotency_key, client_marker,"
                    " fingerprint, arrival_id, t_mono, t_wall) VALUES (?,?,?,?,?,?,?,?)",
                    (self.provider, job_id, key, marker, fingerprint, arrival_id, t_mono, t_wall),
                )
                effect_id = int(cur.lastrowid or 0)
                row = {
                    "id": effect_id,
                    "provider": self.provider,
                    "job_id": job_id,
                    "idempotency_key": key,
                    "client_marker": marker,
                    "fingerprint": fingerprint,
                    "arrival_id": arrival_id,
                    "t_mono": t_mono,
                    "t_wall": t_wall,
                    "external_id": external_id(self.provider, effect_id),
                }
                status, body = respond(row)
                if keep is not None:
                    object_id, resource, doc = keep(row)
                    self._db.execute(
                        "INSERT INTO objects (effect_id, object_id, resource, job_id,"
                        " client_marker, body, t_wall) VALUES (?,?,?,?,?,?,?)",
                        (effect_id, object_id, resource, job_id, marker, doc, t_wall),
                    )
                if key is not None:
                    self._db.execute(
                        "UPDATE idempotency_keys SET state = 'completed', status = ?, body = ?,"
                        " effect_id = ? WHERE key = ?",
                        (status, body, effect_id, key),
                    )
                self._db.execute(
                    # The status is the one about to be sent; a drop later clears it.
                    "UPDATE arrivals SET committed = 1, effect_id = ?, status = ? WHERE id = ?",
                    (effect_id, status, arrival_id),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return effect_id, status, body

    def effects(self, *, marker: str | None = None) -> list[dict[str, Any]]:
        """Every effect (or those under ``marker``), oldest first. ``external_id`` is the
        vendor's id of what a persona's write created (``pi_...``), which is what its
        worker keeps; otherwise the provider's own record id."""
        columns = ", ".join(f"e.{c.strip()}" for c in _EFFECT_COLUMNS.split(","))
        sql = (
            f"SELECT {columns}, o.object_id FROM effects e"
            " LEFT JOIN objects o ON o.effect_id = e.id"
        )
        with self._lock:
            if marker is None:
                rows = self._db.execute(sql + " ORDER BY e.id")
            else:
                rows = self._db.execute(
                    sql + " WHERE e.client_marker = ? ORDER BY e.id",
                    (marker,),
                )
            names = [d[0] for d in rows.description]
            out = [dict(zip(names, r, strict=True)) for r in rows.fetchall()]
        for e in out:
            vendor_id = e.pop("object_id")
            e["external_id"] = vendor_id or external_id(e["provider"], e["id"])
        return out

    def objects(
        self,
        *,
        resource: str | None = None,
        object_id: str | None = None,
        job_id: str | None = None,
        marker: str | None = None,
    ) -> list[dict[str, Any]]:
        """A persona's stored objects, oldest first, narrowed by whatever is given: each
        ``{"object_id", "resource", "job_id", "client_marker", "body", "t_wall",
        "effect_id"}`` with ``body`` the vendor object as JSON text."""
        where, args = [], []
        for column, value in (
            ("resource", resource),
            ("object_id", object_id),
            ("job_id", job_id),
            ("client_marker", marker),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        sql = "SELECT effect_id, object_id, resource, job_id, client_marker, body, t_wall"
        sql += " FROM objects" + (" WHERE " + " AND ".join(where) if where else "")
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY effect_id", args)
            names = [d[0] for d in rows.description]
            return [dict(zip(names, r, strict=True)) for r in rows.fetchall()]

    # -- held requests let go ---------------------------------------------------------

    def record_release(
        self,
        *,
        arrival_id: int,
        fault_id: str,
        action: str,
        job_id: str | None,
        outcome: str,
        released_by: str,
        t_mono: float,
    ) -> None:
        """How a held request was let go (``outcome``, ``released_by``) and when."""
        try:
            with self._bookkeeping():
                self._db.execute(
                    f"INSERT INTO releases ({_RELEASE_COLUMNS.removeprefix('id, ')})"
                    " VALUES (?,?,?,?,?,?,?,?,?)",
                    (
                        self.provider,
                        arrival_id,
                        fault_id,
                        action,
                        job_id,
                        outcome,
                        released_by,
                        t_mono,
                        self._wall(),
                    ),
                )
        except sqlite3.ProgrammingError:
            # Closed: a hold dropped at shutdown ends after the log did; nobody reads it.
            pass

    def releases(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute(f"SELECT {_RELEASE_COLUMNS} FROM releases ORDER BY id")
            names = [d[0] for d in rows.description]
            return [dict(zip(names, r, strict=True)) for r in rows.fetchall()]

    # -- idempotency keys -----------------------------------------------------------

    def reserve_key(self, key: str, fingerprint: str) -> KeyDecision:
        """Decide a keyed write: reserve a new key, or say why it cannot run again."""
        with self._bookkeeping():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                decision = self._reserve(key, fingerprint)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return decision

    def _reserve(self, key: str, fingerprint: str) -> KeyDecision:
        now = self._wall()
        row = self._db.execute(
            "SELECT fingerprint, state, created_wall, status, body FROM idempotency_keys"
            " WHERE key = ?",
            (key,),
        ).fetchone()
        if row is not None and now - row[2] >= self.key_ttl_s:
            # Expired keys are pruned, as Stripe does after 24 h: reuse is a new request.
            self._db.execute("DELETE FROM idempotency_keys WHERE key = ?", (key,))
            row = None
        if row is None:
            self._db.execute(
                "INSERT INTO idempotency_keys (key, fingerprint, state, created_wall)"
                " VALUES (?, ?, 'in_flight', ?)",
                (key, fingerprint, now),
            )
            return KeyDecision("new")
        if row[0] != fingerprint:
            return KeyDecision("mismatch")
        if row[1] == "in_flight":
            return KeyDecision("in_flight")
        return KeyDecision("replay", status=int(row[3]), body=bytes(row[4]))

    def release_key(self, key: str) -> None:
        """Forget an in-flight key whose request ended without executing."""
        with self._bookkeeping():
            self._db.execute(
                "DELETE FROM idempotency_keys WHERE key = ? AND state = 'in_flight'", (key,)
            )

    def complete_key(self, key: str, status: int, body: bytes) -> None:
        """Store an error response for a key that began executing, so retries replay it."""
        with self._lock:
            self._db.execute(
                "UPDATE idempotency_keys SET state = 'completed', status = ?, body = ?"
                " WHERE key = ?",
                (status, body, key),
            )

    def key_state(self, key: str) -> KeyState | None:
        with self._lock:
            row = self._db.execute(
                "SELECT state, created_wall, status, body FROM idempotency_keys WHERE key = ?",
                (key,),
            ).fetchone()
        if row is None or self._wall() - row[1] >= self.key_ttl_s:
            return None
        return KeyState(row[0], row[2], None if row[3] is None else bytes(row[3]))
