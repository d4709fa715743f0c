"""The ``Target`` seam: what is under test, as the trial runner sees it.

Two implementations: :mod:`harness.targets.reference` (our worker, with an in-process
adapter over its ledger) and :mod:`harness.targets.command` (any language, described in
``crashpoint.toml``). A target with a ledger gives the history its rows as events
(claims, result writes, reconciles); a target that can tell its jobs' end states (from
its ledger, or from a declared ``status`` command) gives the oracle those; one that can
do neither gives the oracle provider truth only, and the trial says what that leaves
unjudged.

Every figure an invariant or a wait needs from the target (its retry cap, its lease)
is the target's own: nothing is borrowed from the reference worker (docs/fairness.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from harness.history import Event
from harness.observe import ProviderLog
from harness.oracle import JobFinal

#: No arrival at any provider for this long counts as quiet ...
QUIET_S = 0.3
#: ... and for this many leases: a crashed worker's job is taken over only once its lease
#: has run out, so a shorter silence is not the end.
QUIET_LEASES = 1.5


def quiet_window_s(lease_ttl_s: float) -> float:
    """The provider silence that ends a trial whose target cannot tell its jobs' states,
    and the window in which writes still arriving mean that retries never stopped."""
    return max(QUIET_S, QUIET_LEASES * lease_ttl_s)


@runtime_checkable
class LeaseClock(Protocol):
    """A target whose ledger tells when a job's lease runs out, on this machine's
    monotonic clock (the reference: its ledger stores the expiry its worker renewed to)."""

    def lease_expires_at(self, job_id: str) -> float | None:
        """When ``job_id``'s current lease runs out; None when no lease is held."""
        ...


@runtime_checkable
class HearsJobEnds(Protocol):
    """A target whose workers may announce their jobs' ends (``job_end`` on the failpoint
    socket): it is given where those events collect, and polls less for them."""

    def hear_job_ends(self, source: Callable[[], Sequence[tuple[str, float]]]) -> None:
        """``source()`` returns ``(job, when)`` of every job-end event so far."""
        ...


@runtime_checkable
class CommandProcesses(Protocol):
    """A target with long-lived processes of its own beside the workers (served
    commands): their CPU wait is the machine's too."""

    def command_pids(self) -> list[int]:
        """The pids of those processes now running."""
        ...

    def command_startups(self) -> dict[str, float]:
        """Seconds each took to be ready, by timing key (results.json ``timings``)."""
        ...


#: How a job reaches the target a second time (``duplicate_delivery``): a second
#: consumer with a ledger of its own, or the same job enqueued again into the same target.
Redelivery = Literal["second_consumer", "enqueue_again"]


class TargetAdapter(Protocol):
    """One trial's view of the target: enqueue jobs, start workers, read the end state."""

    #: The name workers know the cell's provider by when the cell names none.
    provider_name: str
    #: The most writes per job the target allows, as it declares; None: it declares none.
    max_attempts: int | None
    redelivery: Redelivery
    #: The multi-step job the target declares, ``(step, provider)`` in order; empty: the
    #: target runs the table's own (the reference), or none (a single-step worker).
    steps: tuple[tuple[str, str], ...]
    #: Job-body fields the target marks as secrets or personal data (``crashpoint.toml``).
    sensitive_fields: tuple[str, ...]
    #: The longest its workers sleep between looks at their queue, as the target
    #: declares (``[target] poll_s``); None: it declares none.
    poll_s: float | None
    #: The least time its workers leave between a refused write and the job's next write,
    #: as the target declares (``[target] min_backoff_s``); None: it declares none.
    min_backoff_s: float | None
    #: How long a job stays invisible to other workers after a claim, when the target's
    #: queue redelivers by a window of its own rather than by the lease its workers renew
    #: (``[target] visibility_s``); None: the lease is the window.
    visibility_s: float | None
    #: Jobs whose last delivery the target's queue refused as one it already holds (its
    #: enqueue command printed ``{"queued": false}``): a duplicate it deduplicated. Read
    #: only where no other delivery of the job runs; :meth:`enqueue` answers for its own.
    refused: set[str]

    def providers(self, kind: str) -> Sequence[tuple[str, str]]:
        """``(name, kind)`` of every provider the workers call; ``kind`` is the cell's,
        for a target whose one provider takes whatever kind the cell has."""
        ...

    def provider_options(self) -> Mapping[str, Mapping[str, Any]]:
        """Start options beyond kind and name, by provider name (``transport="mcp"`` for
        a tool server); a provider not named starts as a plain HTTP provider."""
        ...

    def setup(self) -> None: ...

    def attach_providers(self, providers: Sequence[ProviderLog], env: Mapping[str, str]) -> None:
        """The trial's providers (oracle clients) and the environment its processes get."""
        ...

    def enqueue(
        self,
        job_id: str,
        provider: str,
        body: Mapping[str, Any],
        *,
        steps: Sequence[tuple[str, str]] = (),
    ) -> bool:
        """Deliver a job; ``steps`` are a multi-step job's ``(step, provider)`` in order.
        True when the queue refused this delivery as a job it already holds (its enqueue
        command printed ``{"queued": false}``)."""
        ...

    def redeliver(
        self,
        job_id: str,
        provider: str,
        body: Mapping[str, Any],
        *,
        steps: Sequence[tuple[str, str]] = (),
    ) -> bool:
        """Deliver a completed job again, as a queue whose acknowledgement was lost does;
        False when the target had no completed job to deliver."""
        ...

    def worker_argv(self, role: str | None = None) -> Sequence[str]:
        """The argv of one worker (``role="relay"``: of the target's outbox relay)."""
        ...

    def upgraded_argv(self) -> Sequence[str] | None:
        """The command of the worker's next release, which recovers what this one left
        (``[target] upgraded_command``); None: the target declares none."""
        ...

    def cancel(self, job_id: str) -> bool:
        """Cancel ``job_id`` through the target (``[target] cancel``), returning once the
        target acknowledged it; False: the target declares no way to cancel."""
        ...

    def worker_env(
        self,
        worker_id: str,
        *,
        mutant: str | None,
        lease_ttl_s: float,
        http_timeout_s: float,
    ) -> dict[str, str]: ...

    def quiescent(self, jobs: Iterable[str]) -> bool:
        """Every job has reached an end (acknowledged, dead-lettered or needs_review), or,
        for a target that cannot tell, the providers have gone quiet."""
        ...

    def job_states(self, jobs: Iterable[str]) -> dict[str, JobFinal] | None:
        """Each job's state now (final or not); None when the target cannot tell."""
        ...

    def ledger_dsn(self) -> str | None:
        """The DSN workers use, when the ledger is a server a proxy can stand in front of."""
        ...

    def ledger_events(self) -> list[Event]:
        """Every audit row of the ledger as an event (the observer appends each once)."""
        ...

    def twin(self) -> TargetAdapter:
        """Another handle on the same target with its own connections (for concurrent
        triggers); may be ``self`` when the adapter is safe to share between threads."""
        ...

    def snapshot(self) -> Any:
        """The target's state now; taken while no worker runs."""
        ...

    def restore(self, snapshot: Any) -> None:
        """Put the state back as it was at ``snapshot``; no worker runs meanwhile."""
        ...

    def close(self) -> None: ...
