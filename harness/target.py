"""The ``Target`` seam: what is under test, as the trial runner sees it.

Two implementations: :mod:`harness.targets.reference` (our worker, with an in-process
adapter over its ledger) and :mod:`harness.targets.command` (any language, described in
``crashpoint.toml``). A target with a ledger gives the history its rows as events
(claims, result writes, reconciles) and the oracle its final job states; one without a
ledger gives the oracle provider truth only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from harness.history import Event
from harness.oracle import JobFinal


class TargetAdapter(Protocol):
    """One trial's view of the target: enqueue jobs, start workers, read the end state."""

    #: The name workers know the provider by (``CRASHPOINT_PROVIDER_<NAME>_URL``).
    provider_name: str

    def setup(self) -> None: ...

    def attach_provider(self, client: Any, env: Mapping[str, str]) -> None:
        """The trial's provider client and the environment its processes get."""
        ...

    def enqueue(self, job_id: str, provider: str, body: Mapping[str, Any]) -> None: ...

    def worker_argv(self) -> Sequence[str]: ...

    def worker_env(
        self,
        worker_id: str,
        *,
        mutant: str | None,
        lease_ttl_s: float,
        http_timeout_s: float,
        max_attempts: int,
    ) -> dict[str, str]: ...

    def quiescent(self, jobs: Iterable[str]) -> bool:
        """Every job has reached an end (acknowledged, dead-lettered or needs_review)."""
        ...

    def ledger_dsn(self) -> str | None:
        """The DSN workers use, when the ledger is a server a proxy can stand in front of."""
        ...

    def ledger_jobs(self) -> list[JobFinal] | None:
        """Every job's final state in the ledger; None when the target has no ledger."""
        ...

    def ledger_events(self) -> list[Event]:
        """Every audit row of the ledger as an event (the observer appends each once)."""
        ...

    def twin(self) -> TargetAdapter:
        """Another handle on the same target with its own connections (for concurrent
        triggers); may be ``self`` when the adapter is safe to share between threads."""
        ...

    def snapshot(self) -> Any: ...

    def restore(self, snapshot: Any) -> None: ...

    def close(self) -> None: ...
