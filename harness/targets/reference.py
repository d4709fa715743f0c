"""The reference target: our worker, driven through its in-process ledger adapter."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.history import Event
from harness.oracle import JobFinal
from scenarios.reference import ReferenceTarget, Snapshot


class ReferenceAdapter:
    """A :class:`~harness.target.TargetAdapter` over :class:`ReferenceTarget`."""

    provider_name = "svc"

    def __init__(self, target: ReferenceTarget, *, pg_dsn: str | None = None) -> None:
        self.target = target
        self._pg_dsn = pg_dsn

    @classmethod
    def sqlite(cls, *, state_dir: Path) -> ReferenceAdapter:
        return cls(ReferenceTarget(f"sqlite:///{state_dir / 'ledger.db'}", state_dir=state_dir))

    @classmethod
    def postgres(cls, dsn: str, *, state_dir: Path) -> ReferenceAdapter:
        """One fresh schema per trial, dropped at close: trials never see each other."""
        schema = f"cp_{uuid.uuid4().hex[:12]}"
        return cls(ReferenceTarget(dsn, state_dir=state_dir, schema=schema), pg_dsn=dsn)

    def setup(self) -> None:
        self.target.setup()

    def attach_provider(self, client: Any, env: Mapping[str, str]) -> None:
        """Jobs go straight into the ledger; the reference needs neither."""

    def enqueue(self, job_id: str, provider: str, body: Mapping[str, Any]) -> None:
        self.target.enqueue(job_id, provider, body)

    def worker_argv(self) -> list[str]:
        return self.target.worker_argv()

    def worker_env(
        self,
        worker_id: str,
        *,
        mutant: str | None,
        lease_ttl_s: float,
        http_timeout_s: float,
        max_attempts: int,
    ) -> dict[str, str]:
        return self.target.worker_env(
            worker_id,
            mutant=mutant,
            lease_ttl_s=lease_ttl_s,
            http_timeout_s=http_timeout_s,
            max_attempts=max_attempts,
        )

    def ledger_dsn(self) -> str | None:
        return self._pg_dsn

    def quiescent(self, jobs: Iterable[str]) -> bool:
        return ReferenceTarget.quiescent(self.target.read_ledger(), jobs)

    def ledger_jobs(self) -> list[JobFinal]:
        return [
            JobFinal(
                job_id=j.job_id,
                delivery_state=j.delivery_state,
                execution_state=j.execution_state,
                side_effect_state=j.side_effect_state,
                needs_review=j.needs_review,
                attempts=j.attempts,
            )
            for j in self.target.read_ledger().jobs
        ]

    def ledger_events(self) -> list[Event]:
        view = self.target.read_ledger()
        events = [
            Event(
                c.t_mono,
                f"worker:{c.worker_id}",
                "claim",
                c.job_id,
                c.attempt,
                {"token": c.token, "worker": c.worker_id, "outcome": "ok"},
            )
            for c in view.claims
        ]
        events += [
            Event(
                w.t_mono,
                f"worker:{w.worker_id}",
                "result_write",
                w.job_id,
                w.attempt,
                {
                    "token": w.token,
                    "worker": w.worker_id,
                    "accepted": w.accepted,
                    "wrote": w.outcome,
                    "outcome": "ok" if w.accepted else "rejected",
                },
            )
            for w in view.result_writes
        ]
        events += [
            Event(
                r.t_mono,
                "ledger",
                "reconcile",
                r.job_id,
                r.attempt,
                {"result": r.outcome, "outcome": _reconcile_outcome(r.outcome)},
            )
            for r in view.reconciles
        ]
        return events

    def twin(self) -> ReferenceAdapter:
        """Same ledger, own connection; closing it leaves the schema in place."""
        t = self.target
        return ReferenceAdapter(ReferenceTarget(t.dsn, state_dir=t.state_dir, schema=t.schema))

    def snapshot(self) -> Snapshot:
        return self.target.snapshot()

    def restore(self, snapshot: Any) -> None:
        self.target.restore(snapshot)

    def close(self) -> None:
        self.target.close()
        if self._pg_dsn is not None and self.target.schema:
            _drop_schema(self._pg_dsn, self.target.schema)


def _reconcile_outcome(result: str) -> str:
    return {"confirmed": "ok", "not_found": "ok", "unavailable": "unknown"}.get(result, "error")


def _drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    with (
        contextlib.suppress(psycopg.Error),
        psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn,
    ):
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
