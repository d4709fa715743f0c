"""Custom scenarios: one trial of a target, driven step by step by the caller.

The injection table covers what every worker must survive; a team's own worker has
sequences of its own (the worker that recovers dies too, a toxic in the middle of a
reconcile). A :class:`ScenarioTrial` is a thin layer over :class:`harness.trial.Trial`:
the verbs the table's drivers are written in, the same history, the same oracle, so
its verdict means what a cell's verdict means and its trial page draws the same
timeline. pytest's ``crashpoint`` fixture hands one to a test (docs/pytest.md);
:func:`scenario_trial` opens one anywhere else.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from fake_providers import Fault
from harness.backends.base import WorkerHandle
from harness.contract.errors import ConfigError, CrashpointError
from harness.contract.vocabulary import Verdict
from harness.history import Event, History
from harness.infra import RunInfra, infrastructure_failure
from harness.oracle import Judgement
from harness.plan import Cell
from harness.rendezvous import Gate, Hit
from harness.scenario_cell import CUSTOM_POINT, custom_cell, provider_kind
from harness.scenario_verdict import ScenarioVerdict
from harness.trial import Trial
from harness.trial_run import TrialResult, containment_of, judge_trial, recorded_so_far

if TYPE_CHECKING:
    from harness.network.seam import Link, NetworkSeam

#: How long a verb waits for a worker to reach a hold.
REACH_TIMEOUT_S = 10.0

__all__ = [
    "CUSTOM_POINT",
    "ProviderHold",
    "ScenarioTrial",
    "ScenarioVerdict",
    "custom_cell",
    "open_trial",
    "provider_kind",
    "scenario_trial",
]

F = TypeVar("F", bound=Callable[..., Any])


def _step(verb: F) -> F:
    """A verb that gives up (a hold never reached) leaves the trial inconclusive with its
    reason, as a table driver's would, and still raises so the test stops there."""

    @functools.wraps(verb)
    def run(self: ScenarioTrial, *args: Any, **kwargs: Any) -> Any:
        if self.verdict is not None:
            raise ConfigError(
                f"{verb.__name__}() after check(): the trial is judged and its workers "
                "stopped; act before calling check()"
            )
        try:
            return verb(self, *args, **kwargs)
        except CrashpointError as exc:
            self.error = self.error or str(exc)
            raise

    return cast(F, run)


@dataclass
class ProviderHold:
    """A request held by the provider (before or after it commits) until released."""

    owner: ScenarioTrial
    fault_id: str
    job: str | None

    def wait(self, *, timeout_s: float = REACH_TIMEOUT_S) -> Any:
        """Block until a matching request is held; returns what the provider holds."""
        return self.owner._wait_held(self, timeout_s)

    def release(self, outcome: str = "respond") -> None:
        """Let the request go: ``respond`` (or ``commit``) or ``drop`` the connection."""
        self.owner._release(self, outcome)


class ScenarioTrial:
    """A fresh trial of the target: provider, ledger, failpoints; workers on demand.

    Verbs act at once and are recorded in the trial's history; :meth:`check` waits for
    quiescence, stops every worker and asks the oracle. A trial never checked is judged
    when it closes, so a violation cannot go unrecorded.
    """

    def __init__(
        self,
        trial: Trial,
        *,
        name: str | None = None,
        page: Path | None = None,
        replay: str | None = None,
    ) -> None:
        self.trial = trial
        self.name = name or trial.cell.scenario.name
        self.page = page
        self.replay = replay
        self.verdict: ScenarioVerdict | None = None
        #: Why a verb gave up (the trial is then inconclusive), if one did.
        self.error: str | None = None
        self._t0 = time.monotonic()
        self._closed = False
        #: The facts as results.json keeps them (for a recheck), once judged.
        self._facts: dict[str, Any] | None = None
        self._containment: str | None = None

    # -- what the trial holds -------------------------------------------------------------

    @property
    def history(self) -> History:
        return self.trial.history

    @property
    def jobs(self) -> list[str]:
        return list(self.trial.jobs)

    @property
    def workers(self) -> dict[str, WorkerHandle]:
        return dict(self.trial.workers)

    @property
    def provider_kind(self) -> str:
        return self.trial.cell.provider

    # -- verbs ----------------------------------------------------------------------------

    @_step
    def start(self) -> ScenarioTrial:
        """Set the trial up: state directory, provider, ledger, failpoint socket."""
        self.trial.setup()
        return self

    @_step
    def enqueue(self, job_id: str | None = None) -> str:
        """Enqueue a logical job (``j-0001``, ``j-0002``, ... unless named); its id."""
        return self.trial.enqueue(job_id)

    @_step
    def start_worker(self, *, recovery: bool = False) -> WorkerHandle:
        """Start the next worker (``w1``, ``w2``, ...); ``recovery`` sets
        ``CRASHPOINT_RECOVERY=1`` as after a state-store restore."""
        return self.trial.start_worker(recovery=recovery)

    def hold(self, point: str, *, job: str | None = None) -> Gate:
        """Arm a failpoint: the next worker to reach ``point`` (for ``job``) blocks there
        until it is crashed, signalled or resumed (``hit.resume()``)."""
        return self.trial.hold(point, job=job)

    @_step
    def wait(self, gate: Gate, *, timeout_s: float = REACH_TIMEOUT_S) -> Hit:
        """Block until a worker is held at ``gate``; the trial is inconclusive if none
        comes within ``timeout_s``."""
        what = f"failpoint {gate.point}" + (f" for {gate.job}" if gate.job else "")
        return self.trial.wait_hit(gate, what=what, timeout_s=timeout_s)

    @_step
    def crash(
        self,
        worker: WorkerHandle,
        sig: str = "SIGKILL",
        *,
        at: Gate | Hit | ProviderHold | None = None,
    ) -> bool:
        """Kill ``worker`` with ``sig``, once it is held ``at`` a failpoint or a provider
        hold when one is given; True when it died there (a SIGTERM handler may finish)."""
        hit = None
        if isinstance(at, Gate):
            hit = self.wait(at)
        elif isinstance(at, Hit):
            hit = at
        elif isinstance(at, ProviderHold):
            at.wait()
        return self.trial.crash(worker, sig, hit=hit)

    @_step
    def signal(self, worker: WorkerHandle, sig: str) -> None:
        """Send ``sig`` to the worker's whole tree (``SIGSTOP``/``SIGCONT`` pause it)."""
        self.trial.send(worker, sig)

    @_step
    def provider_hold(self, job: str | None = None, *, after_commit: bool = True) -> ProviderHold:
        """Make the provider hold the next write (for ``job``) before or after it commits."""
        action = "hold_after_commit" if after_commit else "hold_before_commit"
        return ProviderHold(self, self.trial.arm(Fault(action, job=job)), job)

    @_step
    def provider_fault(
        self,
        action: str,
        *,
        job: str | None = None,
        times: int = 1,
        status: int = 503,
        delay_s: float = 0.0,
    ) -> str:
        """Arm any provider fault (``fail_before_commit``, ``delay_response``,
        ``commit_then_drop``, ``fail_lookup``, ...; fake_providers/README.md)."""
        fault = Fault(action, job=job, times=times, status=status, delay_s=delay_s)
        return self.trial.arm(fault)

    @_step
    def toxic(
        self, kind: str, *, link: Link = "provider", stream: str = "downstream", **attributes: float
    ) -> str:
        """Add a Toxiproxy toxic (``latency``, ``timeout``, ``reset_peer``, ...) on the
        worker's link to the provider or its ledger; returns its name."""
        return self._network().on(link, kind, stream=stream, **attributes)

    @_step
    def remove_toxic(self, name: str, *, link: Link = "provider") -> None:
        self._network().off(link, name)

    @_step
    def down(self, link: Link = "provider") -> None:
        """Cut the link: connections are refused until :meth:`up`."""
        self._network().down(link)

    @_step
    def up(self, link: Link = "provider") -> None:
        self._network().up(link)

    @_step
    def sleep(self, seconds: float) -> None:
        """A deliberate wait (a lease running out, a worker left frozen)."""
        self.trial.sleep(seconds)

    @_step
    def wait_quiescent(self, *, timeout_s: float | None = None) -> bool:
        """Block until every job has ended and stays ended; False at the bound."""
        return self.trial.wait_quiescent(timeout_s=timeout_s)

    # -- judgement ------------------------------------------------------------------------

    def check(
        self, *, review: Iterable[str] = (), timeout_s: float | None = None
    ) -> ScenarioVerdict:
        """Wait for quiescence, stop every worker and judge the whole history.

        ``review`` names the jobs whose only safe end is needs_review (an unknown write
        an unqueryable provider cannot reconcile). A trial that does not quiesce within
        the bound is inconclusive, never held.
        """
        if self.verdict is not None:
            return self.verdict
        if self.error is not None:
            return self._settle(Judgement(Verdict.INCONCLUSIVE, reason=self.error))
        events: list[Event] | None = None
        try:
            events, judged, self._facts = judge_trial(self.trial, review, timeout_s=timeout_s)
        except CrashpointError as exc:
            return self._settle(Judgement(Verdict.INCONCLUSIVE, reason=str(exc)), events)
        return self._settle(judged, events)

    def close(self) -> ScenarioVerdict:
        """Judge the trial if nobody did, then tear it down (idempotent)."""
        verdict = self.check()
        if not self._closed:
            self._closed = True
            self.trial.teardown()  # its proxies with it
        return verdict

    def result(self) -> TrialResult:
        """The judged trial as the runner's :class:`TrialResult` (for results.json)."""
        v = self.verdict or self.check()
        duration = time.monotonic() - self._t0
        return TrialResult(
            cell=self.trial.cell,
            seed=self.trial.seed,
            verdict=v.verdict.value,
            reached=v.reached,
            reason=v.reason,
            violations=list(v.violations),
            duration_s=duration,
            events=list(v.events),
            timings={
                "waits_s": self.trial.waits_s,
                "overhead_s": max(0.0, duration - self.trial.waits_s),
            },
            unjudged=dict(v.unjudged),
            reached_by=self.trial.reached_by if v.reached else None,
            warnings=list(v.warnings),
            containment=self._containment,
            trace=list(v.trace),
            review=list(v.review),
            facts=self._facts,
        )

    # -- the rest -------------------------------------------------------------------------

    def _settle(self, judged: Judgement, events: list[Event] | None = None) -> ScenarioVerdict:
        """Keep ``judged`` as the trial's verdict; ``events`` is the history it was judged
        from (None: the trial broke first, so what it recorded so far is kept)."""
        if events is None:
            events = recorded_so_far(self.trial)
        broken = infrastructure_failure(self.trial)
        if broken is not None:
            # Whatever the trial saw after its proxies vanished is the harness's doing.
            was = judged.verdict.value + (f": {judged.reason}" if judged.reason else "")
            judged = Judgement(Verdict.INCONCLUSIVE, reason=f"{broken}; it ended {was}")
        t0 = self.trial.history.t0
        self._containment = containment_of(events)
        self.verdict = ScenarioVerdict(
            verdict=judged.verdict,
            violations=judged.violations,
            reason=judged.reason,
            reached=self.trial.reached,
            events=tuple(e.to_json(t0=t0) for e in events),
            name=self.name,
            page=self.page,
            replay=self.replay,
            unjudged=judged.unjudged,
            warnings=judged.warnings,
            trace=judged.trace,
            review=judged.review,
        )
        return self.verdict

    def _network(self) -> NetworkSeam:
        if self.trial.network is None:
            raise ConfigError(
                "this trial has no network to fault; ask for one with "
                "@pytest.mark.crashpoint(network=True) or scenario_trial(network=True)"
            )
        return self.trial.network

    @_step
    def _wait_held(self, hold: ProviderHold, timeout_s: float) -> Any:
        what = "provider hold" + (f" for {hold.job}" if hold.job else "")
        return self.trial.wait_held(hold.fault_id, what=what, timeout_s=timeout_s)

    @_step
    def _release(self, hold: ProviderHold, outcome: str) -> None:
        self.trial.release(hold.fault_id, outcome)


def open_trial(
    infra: RunInfra,
    cell: Cell,
    *,
    seed: int,
    network: bool = False,
    page: Path | None = None,
    replay: str | None = None,
) -> ScenarioTrial:
    """A :class:`ScenarioTrial` of ``cell`` on the run's infrastructure
    (:meth:`RunInfra.open_trial`), not yet started; ``network`` puts Toxiproxy in front of
    its provider (ToxiproxyUnavailable if none)."""
    return ScenarioTrial(infra.open_trial(cell, seed, network=network), page=page, replay=replay)


@contextlib.contextmanager
def scenario_trial(
    name: str = "custom_scenario",
    *,
    config: str | Path | None = None,
    provider: str | None = None,
    network: bool = False,
    seed: int = 0,
    ledger: str = "sqlite",
    backend: str = "process",
    lease_ttl_s: float | None = None,
    pg_dsn: str | None = None,
    description: str | None = None,
) -> Iterator[ScenarioTrial]:
    """A started custom trial of the target in ``config`` (a crashpoint.toml, or None for
    the reference worker), on infrastructure of its own; closed (judged, torn down) on
    exit. Outside pytest this is the whole API; inside it, use the fixture."""
    command = None
    if config is not None:
        from harness.targets.config import load_config

        command = load_config(Path(config))
    kind = provider_kind(command, provider)
    cell = custom_cell(name, provider=kind, ledger=ledger, backend=backend, description=description)
    with RunInfra.open(
        [], ledger=ledger, backend=backend, pg_dsn=pg_dsn, command=command, lease_ttl_s=lease_ttl_s
    ) as infra:
        st = open_trial(infra, cell, seed=seed, network=network)
        try:
            yield st.start()
        finally:
            st.close()
