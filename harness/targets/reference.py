"""The reference target: our worker, driven through its in-process ledger adapter."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.history import Event
from harness.observe import ProviderLog
from harness.oracle import JobFinal
from harness.targets.base import Redelivery
from scenarios.reference import ReferenceTarget, Snapshot
from scenarios.worker.config import WorkerConfig

#: The reference worker's retry cap: its own setting, which it declares like any target
#: (the worker is started with it, and bounded_retries holds it to it).
MAX_ATTEMPTS = 3

#: The reference worker's lease, its own setting like the cap (``--lease-ttl-s``
#: overrides it). As short as its correctness needs: it renews every third of it and
#: calls out only with a quarter of it left, so a renewal may come 0.1 s late and a
#: call still has 75 ms before another worker may reclaim. With both cores busy
#: (tests/process/test_loaded_machine.py) the correct worker holds every cell at it.
LEASE_TTL_S = 0.3
#: ... and in a container: each failpoint crosses into the container's own network and,
#: on a loaded machine, took 0.17 s a boundary, so claim to call-out outlasted 0.3 s and
#: a correct worker gave its lease up (safe, but the cell went unreached). The lease it
#: ran with before, which held every container cell.
DOCKER_LEASE_TTL_S = 0.6


#: The reference worker's least backoff: its own default (scenarios.worker.config).
MIN_BACKOFF_S: float = WorkerConfig._field_defaults["backoff_s"]


def reference_lease_s(backend: str) -> float:
    """The reference worker's lease on ``backend``."""
    return DOCKER_LEASE_TTL_S if backend == "docker" else LEASE_TTL_S


class ReferenceAdapter:
    """A :class:`~harness.targets.base.TargetAdapter` over :class:`ReferenceTarget`."""

    provider_name = "svc"
    #: A second delivery reaches a second consumer with a ledger of its own.
    redelivery: Redelivery = "second_consumer"
    #: Its duplicates go to a second consumer, which never refuses them.
    refused: set[str] = frozenset()  # type: ignore[assignment]
    #: The reference runs the multi-step job the table describes.
    steps: tuple[tuple[str, str], ...] = ()
    #: The reference's job bodies carry nothing secret.
    sensitive_fields: tuple[str, ...] = ()
    #: Its redelivery goes to a second consumer, whose start is waited on, never a poll.
    poll_s: float | None = None
    #: Its first retry after a refused write waits ``backoff_s``, later ones longer, each
    #: counted from the refusal's answer: declared like any target's (min_backoff).
    min_backoff_s: float | None = MIN_BACKOFF_S
    #: Its ledger's lease is its visibility window.
    visibility_s: float | None = None

    def __init__(
        self,
        target: ReferenceTarget,
        *,
        pg_dsn: str | None = None,
        max_attempts: int | None = MAX_ATTEMPTS,
    ) -> None:
        self.target = target
        self._pg_dsn = pg_dsn
        self.max_attempts = max_attempts

    @classmethod
    def sqlite(cls, *, state_dir: Path) -> ReferenceAdapter:
        return cls(ReferenceTarget(f"sqlite:///{state_dir / 'ledger.db'}", state_dir=state_dir))

    @classmethod
    def postgres(cls, dsn: str, *, state_dir: Path) -> ReferenceAdapter:
        """One fresh schema per trial, dropped at close: trials never see each other."""
        schema = f"cp_{uuid.uuid4().hex[:12]}"
        return cls(ReferenceTarget(dsn, state_dir=state_dir, schema=schema), pg_dsn=dsn)

    def providers(self, kind: str) -> Sequence[tuple[str, str]]:
        """One provider, of the cell's kind."""
        return [(self.provider_name, kind)]

    def provider_options(self) -> Mapping[str, Mapping[str, Any]]:
        """Its one provider speaks HTTP."""
        return {}

    def setup(self) -> None:
        self.target.setup()

    def attach_providers(self, providers: Sequence[ProviderLog], env: Mapping[str, str]) -> None:
        """Jobs go straight into the ledger; the reference needs neither."""

    def enqueue(
        self,
        job_id: str,
        provider: str,
        body: Mapping[str, Any],
        *,
        steps: Sequence[tuple[str, str]] = (),
    ) -> bool:
        self.target.enqueue(job_id, provider, body, steps=steps)
        return False  # the ledger never refuses: a known job is delivered again

    def redeliver(
        self,
        job_id: str,
        provider: str,
        body: Mapping[str, Any],
        *,
        steps: Sequence[tuple[str, str]] = (),
    ) -> bool:
        """The ledger is the reference's queue too: the job goes back to ``queued``."""
        del provider, body, steps
        return self.target.redeliver(job_id)

    def worker_argv(self, role: str | None = None) -> list[str]:
        # One program for both: CRASHPOINT_ROLE tells the relay it is one.
        del role
        return self.target.worker_argv()

    def upgraded_argv(self) -> list[str]:
        """Its next release is its version 2 (scenarios/worker/upgrade.py)."""
        return [*self.target.worker_argv(), "--version", "2"]

    def cancel(self, job_id: str) -> bool:
        """A cancel request in its ledger, which its workers read before each effect."""
        self.target.ledger.request_cancel(job_id, now=time.monotonic())
        return True

    def worker_env(
        self,
        worker_id: str,
        *,
        mutant: str | None,
        lease_ttl_s: float,
        http_timeout_s: float,
    ) -> dict[str, str]:
        return self.target.worker_env(
            worker_id,
            mutant=mutant,
            lease_ttl_s=lease_ttl_s,
            http_timeout_s=http_timeout_s,
            max_attempts=self.max_attempts,
        )

    def ledger_dsn(self) -> str | None:
        return self._pg_dsn

    def quiescent(self, jobs: Iterable[str]) -> bool:
        return self.target.jobs_quiescent(jobs)

    def lease_expires_at(self, job_id: str) -> float | None:
        """The job's lease expiry as its owner last renewed it (the worker's monotonic
        clock, which is this machine's)."""
        row = self.target.read_ledger().job(job_id)
        return None if row is None else row.lease_expires_at

    def job_states(self, jobs: Iterable[str]) -> dict[str, JobFinal]:
        """Every job's state in the ledger (a job missing from it has none)."""
        wanted = set(jobs)
        return {j.job_id: j for j in self._ledger_jobs() if j.job_id in wanted}

    def _ledger_jobs(self) -> list[JobFinal]:
        return [
            JobFinal(
                job_id=j.job_id,
                delivery_state=j.delivery_state,
                execution_state=j.execution_state,
                side_effect_state=j.side_effect_state,
                needs_review=j.needs_review,
                attempts=j.attempts,
                external_ref=j.result_ref,
                last_error=j.last_error,
                review_reason=j.review_reason,
                idempotency_key=j.idempotency_key,
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
        twin = ReferenceTarget(t.dsn, state_dir=t.state_dir, schema=t.schema)
        return ReferenceAdapter(twin, max_attempts=self.max_attempts)

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
