"""The in-process adapter the harness uses to drive the reference worker.

It owns no worker process: it creates the ledger, enqueues jobs, builds the environment
and argv a backend starts workers with, and reads the ledger back for the oracle.
"""

from __future__ import annotations

import os
import site
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contract.env import provider_env_var, provider_kind_var
from scenarios.ledger import (
    ClaimRow,
    Dump,
    JobRow,
    LedgerStore,
    ReconcileRow,
    ResultWriteRow,
    open_ledger,
    split_dsn,
)
from scenarios.worker.config import ProviderSpec

#: A job's journey ends in one of these (or in needs_review).
END_DELIVERY_STATES = frozenset({"acknowledged", "dead_lettered"})


@dataclass(frozen=True)
class LedgerView:
    """Everything the oracle reads from the reference ledger, in one consistent read."""

    jobs: tuple[JobRow, ...]
    claims: tuple[ClaimRow, ...]
    result_writes: tuple[ResultWriteRow, ...]
    reconciles: tuple[ReconcileRow, ...]

    def job(self, job_id: str) -> JobRow | None:
        return next((j for j in self.jobs if j.job_id == job_id), None)


@dataclass(frozen=True)
class Snapshot:
    """An older copy of the ledger's state tables (audit rows are never rolled back)."""

    dump: Dump
    t_mono: float


class ReferenceTarget:
    """``ReferenceTarget("sqlite:///ledger.db", state_dir=d)`` or a ``postgresql://`` DSN."""

    def __init__(self, dsn: str, *, state_dir: str | Path, schema: str | None = None) -> None:
        self.state_dir = Path(state_dir)
        if dsn.startswith("sqlite:///") and not Path(dsn.removeprefix("sqlite:///")).is_absolute():
            # Workers run in the state directory too, but an absolute path keeps every
            # process on the same file whatever its working directory.
            dsn = f"sqlite:///{(self.state_dir / dsn.removeprefix('sqlite:///')).resolve()}"
        self.schema = schema
        if dsn.startswith(("postgresql://", "postgres://")):
            dsn, in_dsn = split_dsn(dsn)
            self.schema = schema or in_dsn
        self.dsn = dsn
        # One connection per calling thread: two triggers "at the same moment" must race in
        # the database (where the unique job id decides), not trip over one connection.
        self._local = threading.local()
        self._opened: list[LedgerStore] = []
        self._lock = threading.Lock()

    @property
    def ledger(self) -> LedgerStore:
        store: LedgerStore | None = getattr(self._local, "store", None)
        if store is None:
            store = open_ledger(self.dsn, schema=self.schema, base_dir=self.state_dir)
            self._local.store = store
            with self._lock:
                self._opened.append(store)
        return store

    def setup(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.ledger.setup()

    def enqueue(
        self,
        job_id: str,
        provider: str,
        body: Mapping[str, Any],
        *,
        steps: Sequence[tuple[str, str]] = (),
    ) -> bool:
        """Deliver a job (``steps``: a multi-step job's ``(step, provider)`` in order);
        False when the same job was already delivered (it collapses onto the existing
        record, which the caller can read back)."""
        return self.ledger.enqueue(job_id, provider, body, now=time.monotonic(), steps=steps)

    def redeliver(self, job_id: str) -> bool:
        """Deliver a completed job again, as a queue does whose acknowledgement was lost;
        False when the job was not acknowledged."""
        return self.ledger.redeliver(job_id, now=time.monotonic())

    def snapshot(self) -> Snapshot:
        return Snapshot(self.ledger.dump(), time.monotonic())

    def restore(self, snapshot: Snapshot) -> None:
        """Put the state tables back as they were at ``snapshot``; fencing tokens and
        attempt counters stay monotonic. Stop the workers first, and restart them with
        ``recovery=True``."""
        self.ledger.load(snapshot.dump)

    def read_ledger(self) -> LedgerView:
        store = self.ledger
        return LedgerView(
            jobs=tuple(store.jobs()),
            claims=tuple(store.claims()),
            result_writes=tuple(store.result_writes()),
            reconciles=tuple(store.reconciles()),
        )

    @staticmethod
    def quiescent(view: LedgerView, jobs: Iterable[str] | None = None) -> bool:
        """Every job (or every one of ``jobs``) is acknowledged, dead-lettered or in review."""
        return _ended(view.jobs, jobs)

    def jobs_quiescent(self, jobs: Iterable[str] | None = None) -> bool:
        """:meth:`quiescent` from the jobs table alone: a trial asks every 20 ms while it
        waits, and a whole view is four reads where this is one."""
        return _ended(self.ledger.jobs(), jobs)

    def worker_env(
        self,
        worker_id: str,
        *,
        mutant: str | None = None,
        providers: Mapping[str, ProviderSpec | tuple[str, str]] | None = None,
        failpoints: str | Path | None = None,
        recovery: bool = False,
        lease_ttl_s: float | None = None,
        http_timeout_s: float | None = None,
        max_attempts: int | None = None,
        poll_s: float | None = None,
        backoff_s: float | None = None,
    ) -> dict[str, str]:
        """The ``CRASHPOINT_*`` variables a worker needs (merge into ``os.environ``).

        ``providers`` maps a provider name to ``(kind, url)``.
        """
        env = {
            "CRASHPOINT_LEDGER_DSN": self.dsn,
            "CRASHPOINT_WORKER_ID": worker_id,
            "CRASHPOINT_STATE_DIR": str(self.state_dir.resolve()),
            "CRASHPOINT_MUTANT": mutant or "",
        }
        if self.schema:
            env["CRASHPOINT_LEDGER_SCHEMA"] = self.schema
        for name, spec in (providers or {}).items():
            kind, url = (spec.kind, spec.url) if isinstance(spec, ProviderSpec) else spec
            env[provider_env_var(name)] = url
            env[provider_kind_var(name)] = kind
        if failpoints is not None:
            env["CRASHPOINT_FAILPOINTS"] = str(failpoints)
        if recovery:
            env["CRASHPOINT_RECOVERY"] = "1"
        optional = {
            "CRASHPOINT_LEASE_TTL_S": lease_ttl_s,
            "CRASHPOINT_HTTP_TIMEOUT_S": http_timeout_s,
            "CRASHPOINT_MAX_ATTEMPTS": max_attempts,
            "CRASHPOINT_POLL_S": poll_s,
            "CRASHPOINT_BACKOFF_S": backoff_s,
        }
        env.update({k: str(v) for k, v in optional.items() if v is not None})
        env["PYTHONPATH"] = _worker_path()
        return env

    @staticmethod
    def worker_argv() -> list[str]:
        # -S: no site module. Processing the interpreter's .pth files (an editable
        # install's finder, an environment's start-up hooks) cost each worker about a
        # quarter of its start (27 of 93 ms of CPU here), and a demo starts ~150 workers;
        # the paths they would have added are given in PYTHONPATH (_worker_path).
        return [sys.executable, "-S", "-m", "scenarios.worker"]

    def close(self) -> None:
        with self._lock:
            opened, self._opened = self._opened, []
        for store in opened:
            store.close()
        self._local = threading.local()

    def __enter__(self) -> ReferenceTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _worker_path() -> str:
    """The import path of a worker started without ``site``: the caller's PYTHONPATH
    first (it may point at another checkout), then this checkout and the interpreter's
    site-packages, where the worker's own dependencies (psycopg) live."""
    here = str(Path(__file__).resolve().parent.parent)
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    dirs = [os.environ.get("PYTHONPATH", ""), here, *site.getsitepackages(), user or ""]
    seen: list[str] = []
    for entry in (d for part in dirs for d in part.split(os.pathsep)):
        if entry and entry not in seen:
            seen.append(entry)
    return os.pathsep.join(seen)


def _ended(rows: Iterable[JobRow], jobs: Iterable[str] | None) -> bool:
    wanted = None if jobs is None else set(jobs)
    seen = set()
    for j in rows:
        if wanted is not None and j.job_id not in wanted:
            continue
        seen.add(j.job_id)
        if not (j.needs_review or j.delivery_state in END_DELIVERY_STATES):
            return False
    return wanted is None or wanted <= seen
