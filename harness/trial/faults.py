"""Faults and holds: a failpoint armed and waited for, a provider fault armed, a held
request waited for and released; each wait bounded by the reach of a boundary."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from fake_providers import Fault
from harness.backends.base import describe_exit
from harness.contract.errors import Inconclusive, RendezvousTimeout
from harness.cpu_wait import CpuWait
from harness.history import Event
from harness.reach import within_reach
from harness.rendezvous import Gate, Hit
from harness.targets.command_output import stderr_tail
from harness.trial.state import TrialState

#: How long a worker gets to reach a failpoint or a provider hold: its start-up and a
#: first look at its queue on a loaded machine (the harness's own bound), plus one
#: declared poll of its own (``[target] poll_s``) for a worker that sleeps before it looks;
#: stretched by the time the workers then waited for a CPU (:mod:`harness.reach`).
REACH_S = 10.0

T = TypeVar("T")


class FaultVerbs(TrialState):
    """Verbs that arm faults and wait at the boundaries they hold."""

    def hold(
        self, point: str, *, job: str | None = None, step: str | None = None, or_next: bool = False
    ) -> Gate:
        """Hold ``job``'s next hit at ``point``: at ``step`` of a multi-step job, else at
        a boundary of the cell's own provider (a hit that names another is let go: a job
        may call billing, then mailer, and a mailer cell's kill belongs at mailer's).

        ``or_next``: should ``job`` end without reaching the point, hold the next job
        enqueued after it instead (then the one after that). A correct worker whose call
        got no answer in its own time-out looks the write up and never passes
        ``after_external_call``; on a loaded machine that happens, and the cell is then
        played on the batch's next job rather than waited for in vain. The hit names the
        job it held."""
        assert self.rendezvous is not None
        provider = self.provider_name if step is None else None
        then: list[str] = []
        if or_next and job in self.jobs:
            then = self.jobs[self.jobs.index(job) + 1 :]
        return self.rendezvous.hold(point, job=job, step=step, provider=provider, then=then)

    @property
    def reach_s(self) -> float:
        """How long a worker gets to reach a boundary (:data:`REACH_S`, and its poll)."""
        poll = self.target.poll_s if self.target is not None else None
        return REACH_S + (poll or 0.0)

    def wait_hit(self, gate: Gate, *, what: str, timeout_s: float | None = None) -> Hit:
        t0 = time.monotonic()
        try:
            hit = self._within_reach(gate.wait, timeout_s)
        except RendezvousTimeout as exc:
            raise Inconclusive(self._unreached(what, exc)) from exc
        finally:
            self.waits_s += time.monotonic() - t0  # the worker's time, not ours
        self.reached, self.reached_by = True, "failpoint"
        return hit

    def _unreached(self, what: str, exc: RendezvousTimeout) -> str:
        """Why a boundary was never reached: every worker gone before it is the reason
        itself (its exit status and last stderr lines), not a missing failpoint call."""
        handles = list(self.workers.values())
        if handles and all(not h.alive() for h in handles):
            exits = "; ".join(
                f"{name} {describe_exit(h.returncode)}{_stderr_of(h)}"
                for name, h in self.workers.items()
            )
            return f"{what} was never reached: every worker exited first: {exits}"
        return f"{what} was never reached: {exc}"

    def _within_reach(self, wait: Callable[[float], T], timeout_s: float | None) -> T:
        """``wait`` for a boundary: :attr:`reach_s` (or ``timeout_s``), stretched by the
        time the workers waited for a CPU (:mod:`harness.reach`)."""
        return within_reach(
            wait,
            self.reach_s if timeout_s is None else timeout_s,
            starved=lambda: CpuWait(self.worker_pids, from_birth=True),
            most_s=self.config.quiescence_timeout_s,
            abort=self.abort,
        )

    def arm(self, fault: Fault) -> str:
        fault_id: str = self.client.arm(fault)
        self.history.append("supervisor", "note", job=fault.job, armed=fault.action)
        return fault_id

    def wait_held(self, fault_id: str, *, what: str, timeout_s: float | None = None) -> Any:
        t0 = time.monotonic()
        try:
            held = self._within_reach(lambda s: self.client.wait_held(fault_id, s), timeout_s)
        except RendezvousTimeout as exc:
            raise Inconclusive(self._unreached(what, exc)) from exc
        finally:
            self.waits_s += time.monotonic() - t0  # the worker's time, not ours
        self.reached, self.reached_by = True, "provider"
        self.record_held(held)
        return held

    def record_held(self, held: Any) -> None:
        """The provider holds a request: in the history at the moment it was held."""
        self.history.append(
            f"provider:{self.provider_name}",
            "hold",
            job=held.job_id,
            t=held.t_mono,
            committed=held.committed,
            arrival=held.arrival_id,
        )

    def writes(self, job: str) -> list[Event]:
        """The writes for ``job`` that reached the provider so far, from the history."""
        self.observer.drain()
        return [e for e in self.history.of_kind("arrival") if e.job == job]

    def release(
        self,
        fault_id: str,
        outcome: str,
        *,
        arrival_id: int | None = None,
        by: float | None = None,
    ) -> None:
        """Let the held request go now (or, ``by``, have the provider let it go by then).

        The ``release`` event comes from the provider's log, at the moment it let go:
        this call's, or the hold's own deadline's when that came first (then this call
        is late and harmless, and the history says so)."""
        n = self.client.release(fault_id, outcome=outcome, arrival_id=arrival_id, by=by)
        if n == 0:
            self.history.append(
                "supervisor",
                "note",
                text=f"release ({outcome}) of fault {fault_id} came after the provider had "
                "let the held request go at its deadline",
            )


def _stderr_of(handle: Any) -> str:
    """The last lines the worker wrote to stderr, where the backend kept them."""
    path = getattr(handle, "stderr_path", None)
    if path is None:
        return ""
    try:
        data = Path(path).read_bytes()[-4096:]
    except OSError:
        return ""
    return stderr_tail(data)
