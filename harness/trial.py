"""One trial: fresh state, faults applied, quiescence, oracle check.

:class:`Trial` owns everything one cell needs (a state directory, a fake provider, the
target's ledger, a failpoint rendezvous, the backend's workers) and the verbs scenario
drivers are written in (start a worker, hold it at a boundary, signal it, wait for
quiescence). Everything that happens goes into the trial's one :class:`History`, which
the oracle judges and the report draws (:func:`harness.verdict.run_trial`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from fake_providers import Fault, ProviderPool, ProviderProcess, start_provider
from harness.attempts import open_attempts, reports_claims
from harness.backends.base import Backend, LogsApart, WorkerHandle, record_escalation
from harness.contract.env import STATE_DIR, provider_env_name, provider_env_var, provider_kind_var
from harness.contract.errors import ConfigError, Inconclusive, RendezvousTimeout
from harness.cpu_wait import CpuWait
from harness.filelocks import held_write_locks
from harness.history import Event, History
from harness.lanes import WorkerNames
from harness.observe import Observer
from harness.oracle import TrialFacts
from harness.phases import Phases
from harness.plan import Cell
from harness.providers import ProviderControl
from harness.reach import within_reach
from harness.rendezvous import Gate, Hit, Rendezvous
from harness.target import LeaseClock, TargetAdapter, quiet_window_s
from harness.watchdog import Watchdog

if TYPE_CHECKING:
    from harness.network.seam import NetworkSeam

#: The reference worker's provider name; a command target names its own.
PROVIDER_NAME = "svc"
#: A worker that finishes its attempt on SIGTERM gets the time its own lease allows.
TERM_GRACE_LEASES = 2.0
#: How soon a worker that handles SIGTERM by dying counts as having died at its boundary.
_DIED_AT_ONCE_S = 0.1
#: How often a stopped worker holding a write lock is let run and stopped again, and for
#: how long each time: a transaction such as a lease renewal commits within milliseconds.
STOP_TRIES = 20
LOCK_THAW_S = 0.005
#: Between two reads of the jobs' states while waiting for quiescence: a job's end is
#: a row in the target's ledger, which no one announces, so it is polled; a read costs a
#: fraction of a millisecond, and a trial ends at most this much after its last job.
QUIESCENCE_POLL_S = 0.02
#: How long a worker gets to reach a failpoint or a provider hold: its start-up and a
#: first look at its queue on a loaded machine (the harness's own bound), plus one
#: declared poll of its own (``[target] poll_s``) for a worker that sleeps before it looks;
#: stretched by the time the workers then waited for a CPU (:mod:`harness.reach`).
REACH_S = 10.0

T = TypeVar("T")


@dataclass(frozen=True)
class TrialConfig:
    """Timing and infrastructure shared by every trial of a run.

    The lease is the target's (a command target declares it); limits such as the retry
    cap are the target's own and come from it, never from here (docs/fairness.md).
    """

    lease_ttl_s: float = 0.6
    http_timeout_s: float = 0.6
    jobs_per_trial: int = 2
    quiescence_timeout_s: float = 20.0
    #: How long a resumed or recovering worker gets to act before the end state is read.
    settle_s: float = 0.25
    pg_dsn: str | None = None
    keep_dirs: bool = False
    workdir: Path | None = None
    #: How long a worker sent SIGTERM gets to exit before SIGKILL: ``[target]
    #: term_grace_s``; None: two leases (docs/fairness.md).
    term_grace_s: float | None = None

    @property
    def term_grace(self) -> float:
        """The SIGTERM grace in seconds, declared or by default two leases."""
        if self.term_grace_s is not None:
            return self.term_grace_s
        return TERM_GRACE_LEASES * self.lease_ttl_s

    @classmethod
    def for_target(
        cls,
        lease_ttl_s: float | None,
        pg_dsn: str | None,
        *,
        backend: str = "process",
        term_grace_s: float | None = None,
    ) -> TrialConfig:
        """The settings every command gives a trial: ``lease_ttl_s`` is the target's (a
        command target always declares one); None is the reference worker's own on
        ``backend`` (docs/fairness.md). ``term_grace_s``: the target's; None: two leases."""
        from harness.targets.reference import reference_lease_s

        lease = lease_ttl_s or reference_lease_s(backend)
        return cls(
            lease_ttl_s=lease,
            http_timeout_s=max(0.3, lease),
            pg_dsn=pg_dsn,
            term_grace_s=term_grace_s,
        )


class Trial:
    """The state and verbs of one running trial."""

    def __init__(
        self,
        cell: Cell,
        *,
        seed: int,
        config: TrialConfig,
        make_backend: Callable[[History], Backend],
        make_target: Callable[[Path], TargetAdapter],
        network: NetworkSeam | None = None,
        watchdog: Watchdog | None = None,
        abort: threading.Event | None = None,
        provider_pool: ProviderPool | None = None,
    ) -> None:
        self.cell = cell
        #: The run's abort (set on Ctrl-C): the trial's waits end at once and it tears down.
        self.abort = abort if abort is not None else threading.Event()
        self.watchdog = watchdog
        self.seed = seed
        self.config = config
        self.rng = random.Random(f"{seed}:{cell.id}")
        self.history = History()
        self.observer = Observer(self.history)
        self.names = WorkerNames()
        self.backend = make_backend(self.history)
        self.network = network
        self.reached = False
        #: How the cell was reached: at a failpoint (exactly), at a provider hold (black
        #: box), or None (by the harness's own action, or not at all).
        self.reached_by: str | None = None
        self.waits_s = 0.0
        #: The harness's own steps, timed (results.json ``timings``, ``nox -s bench``).
        self.phases = Phases()
        # Short paths: the failpoint socket lives here and UNIX socket paths are short.
        base = config.workdir or Path(tempfile.gettempdir())
        base.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix="cp-", dir=base))
        if watchdog is not None:
            watchdog.watch_dir(self.dir)  # removed even if the harness is SIGKILLed
        self._make_target = make_target
        #: The run's warm providers; none when the trial's directory is kept, so each
        #: provider's log stays in it.
        self._pool = None if config.keep_dirs else provider_pool
        self.workers: dict[str, WorkerHandle] = {}
        self.paused: set[str] = set()
        #: Further consumers of the trial's jobs (see :meth:`add_consumer`); the oracle
        #: audits the first target's ledger and every consumer's provider traffic.
        self.consumers: list[tuple[TargetAdapter, list[str]]] = []
        self._next_worker = 1
        self._next_relay = 1
        self.jobs: list[str] = []
        self._bodies: dict[str, dict[str, Any]] = {}
        #: Every provider the target's workers call, by name; the cell's faults aim at
        #: :attr:`provider` (named :attr:`provider_name`), and its jobs go there.
        self.providers: dict[str, ProviderProcess] = {}
        self.provider: ProviderProcess | None = None
        self.target: TargetAdapter | None = None
        self.rendezvous: Rendezvous | None = None
        self.provider_url = ""
        self.provider_name = PROVIDER_NAME
        #: The trial's multi-step job, ``(step, provider)`` in order; empty: one step.
        self.steps: tuple[tuple[str, str], ...] = ()
        self.stopped_at: float | None = None
        #: When the last wait for quiescence ran out (None: it was reached).
        self.quiet_deadline: float | None = None
        #: Jobs enqueued from now on name an identity (``identity`` in their body) that
        #: every call for them must act under.
        self.bind_identities = False

    # -- lifecycle ----------------------------------------------------------------------

    def setup(self) -> None:
        self.target = self._make_target(self.dir)
        self.provider_name = self.cell.provider_name or self.target.provider_name
        declared = dict(self.target.providers(self.cell.provider))
        if declared.get(self.provider_name) != self.cell.provider:
            raise ConfigError(
                f"cell {self.cell.id} aims at provider {self.provider_name!r} of kind "
                f"{self.cell.provider!r}, which the target does not declare"
            )
        self.steps = self._job_steps()
        for _, name in self.steps:
            # The reference's later steps call providers of the cell's kind of their own.
            declared.setdefault(name, self.cell.provider)
        with self.phases.timed("provider"):
            self.providers = start_providers(
                declared, self.dir, self.target.provider_options(), pool=self._pool
            )
        ttl = self.cell.scenario.key_ttl_s
        if ttl is not None:
            for provider in self.providers.values():
                if provider.kind == "idempotent":
                    provider.client.configure(key_ttl_s=ttl)
        self.provider = self.providers[self.provider_name]
        self.provider_url = self.provider.url
        for name, provider in self.providers.items():
            self.observer.watch_provider(provider.client)
            if provider.transport == "mcp":
                # What each tool declares, as its clients read it: the oracle holds the
                # annotations to what the provider then does (tool_annotations).
                self.history.append(f"provider:{name}", "tools", tools=provider.client.tools())
        with self.phases.timed("rendezvous"):
            self.rendezvous = Rendezvous(
                str(self.dir / "failpoints.sock"), history=self.history, names=self.names.name_of
            )
        with self.phases.timed("ledger"):
            self.target.setup()
        self.observer.watch_ledger(self.target)
        if self.network is not None:
            self.network.attach(
                history=self.history,
                provider_url=self.provider_url,
                ledger_dsn=self.target.ledger_dsn(),
            )
        self.target.attach_providers(
            [p.client for p in self.providers.values()], self.provider_env()
        )

    def _job_steps(self) -> tuple[tuple[str, str], ...]:
        assert self.target is not None
        if not self.cell.scenario.steps:
            return ()
        if self.target.steps:
            return self.target.steps
        return tuple((s.name, s.provider or self.provider_name) for s in self.cell.scenario.steps)

    def stop(self) -> None:
        """Stop every worker and the rendezvous: from here on nothing acts, and what the
        providers and the ledger hold is the trial's last word (idempotent)."""
        if self.stopped_at is not None:
            return
        self.stopped_at = time.monotonic()

        def stop_one(handle: WorkerHandle) -> None:
            with contextlib.suppress(Exception):
                if handle.name in self.paused:
                    handle.resume()
                handle.stop(timeout_s=self.config.term_grace)

        live = [h for h in self.workers.values() if h.exited_at is None]
        if len(live) > 1:
            # Side by side: each stop waits for its worker's exit, and they add up.
            with ThreadPoolExecutor(max_workers=len(live)) as pool:
                list(pool.map(stop_one, live))
        for handle in self.workers.values():
            stop_one(handle)  # reaps the rest; at once for one already stopped
        with contextlib.suppress(Exception):
            self.backend.close()
        if self.rendezvous is not None:
            with contextlib.suppress(Exception):
                self.rendezvous.close()

    def record(self) -> list[Event]:
        """Stop, bring in the providers', ledger's and logs' last records, and return the
        history sorted by time: the list the oracle judges and results.json keeps."""
        with self.phases.timed("record"):
            self.stop()
            self.observer.settle()
            return self.history.events()

    def teardown(self) -> None:
        with self.phases.timed("teardown"):
            self._teardown()
        # Last, once nothing of the trial can act: a pooled provider is wiped for the
        # next trial, which is provider time, as its start was.
        with self.phases.timed("provider"):
            release_providers(self.providers, self._pool)

    def _teardown(self) -> None:
        self.stop()
        for target in (self.target, *(t for t, _ in self.consumers)):
            if target is not None:
                with contextlib.suppress(Exception):
                    target.close()
        if not self.config.keep_dirs:
            shutil.rmtree(self.dir, ignore_errors=True)
        if self.watchdog is not None:
            self.watchdog.forget_dir(self.dir)

    # -- verbs for drivers ----------------------------------------------------------------

    @property
    def client(self) -> ProviderControl:
        assert self.provider is not None
        return self.provider.client

    def job_body(self, job_id: str) -> dict[str, Any]:
        """The job's payload: the same every time it is asked for (a trigger or a
        redelivery carries the same payload), varied by the seed across trials."""
        if job_id not in self._bodies:
            body: dict[str, Any] = {
                "job_id": job_id,
                "amount_cents": self.rng.randrange(100, 100_000),
            }
            fields = self.target.sensitive_fields if self.target is not None else ()
            body.update({f: sensitive_stand_in(f, job_id) for f in fields})
            if self.bind_identities:
                # One identity per job, so a fault on one job's login leaves the others be.
                body["identity"] = f"acct-{job_id.removeprefix('j-')}"
            self._bodies[job_id] = body
        return dict(self._bodies[job_id])

    def sensitive_values(self) -> dict[str, str]:
        """Each stand-in value the jobs' sensitive fields were given, to its field."""
        fields = self.target.sensitive_fields if self.target is not None else ()
        return {sensitive_stand_in(f, job): f for job in self._bodies for f in fields}

    def enqueue(self, job_id: str | None = None, *, target: TargetAdapter | None = None) -> str:
        target = target or self.target
        assert target is not None
        if job_id is None:
            job_id = self.next_job_id()
        if job_id not in self.jobs:
            self.jobs.append(job_id)
        # Stamped when the delivery began: a worker may take the job up before a slow
        # enqueue command has exited.
        t = time.monotonic()
        body = self.job_body(job_id)
        target.enqueue(job_id, self.provider_name, body, steps=self.steps)
        # The job's identity, when it names one: the oracle holds every call to it.
        bound = {"identity": body["identity"]} if "identity" in body else {}
        self.history.append("supervisor", "enqueue", job=job_id, t=t, **bound)
        return job_id

    def next_job_id(self) -> str:
        """The id :meth:`enqueue` gives the next new job (to arm a fault for it first)."""
        return f"j-{len(self.jobs) + 1:04d}"

    def redeliver(self, job_id: str) -> bool:
        """Deliver a completed job again: its acknowledgement was lost on the way."""
        assert self.target is not None
        t = time.monotonic()
        again = self.target.redeliver(
            job_id, self.provider_name, self.job_body(job_id), steps=self.steps
        )
        self.history.append("supervisor", "enqueue", job=job_id, t=t, redelivered=again)
        return again

    def enqueue_batch(self) -> str:
        """Enqueue this trial's jobs; the first is the one the fault aims at."""
        first = self.enqueue()
        for _ in range(self.config.jobs_per_trial - 1):
            self.enqueue()
        return first

    def start_worker(
        self,
        *,
        recovery: bool = False,
        direct: bool = False,
        consumer: TargetAdapter | None = None,
        role: str | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> WorkerHandle:
        """Start the next worker (of ``consumer``, else of the trial's target); ``direct``
        bypasses the trial's proxies (a healthy peer). ``role="relay"`` starts the
        reference worker's outbox relay instead (named ``r1``, ``r2``, ...); ``extra_env``
        is added to the process's environment last (``CRASHPOINT_OUTBOX=1``, a skewed clock)."""
        target = consumer or self.target
        assert target is not None
        assert self.rendezvous is not None
        if role == "relay":
            name = f"r{self._next_relay}"
            self._next_relay += 1
        else:
            name = f"w{self._next_worker}"
            self._next_worker += 1
        env = self.provider_env(direct=direct)
        env.update(
            target.worker_env(
                name,
                mutant=self.cell.mutant,
                lease_ttl_s=self.config.lease_ttl_s,
                http_timeout_s=self.config.http_timeout_s,
            )
        )
        if self.network is not None and not direct and "CRASHPOINT_LEDGER_DSN" in env:
            env["CRASHPOINT_LEDGER_DSN"] = self.network.ledger_dsn(env["CRASHPOINT_LEDGER_DSN"])
        # A command target's [[providers]] env: the same URLs, where the worker's SDK looks.
        aliases = getattr(target, "url_aliases", None)
        if aliases is not None:
            env.update(aliases(env))
        env["CRASHPOINT_WORKER_ID"] = name
        if recovery:
            env["CRASHPOINT_RECOVERY"] = "1"
        if role is not None:
            env["CRASHPOINT_ROLE"] = role
        env.update(extra_env or {})
        cwd = env.get(STATE_DIR, str(self.dir))
        argv = target.worker_argv()
        start = functools.partial(self.backend.start, name, argv, env=env, cwd=cwd)
        if Path(cwd) != self.dir and isinstance(self.backend, LogsApart):
            # The worker's own state directory holds the worker's files only (a restore
            # replaces it): its logs are the harness's, and stay in the trial's directory.
            start = functools.partial(
                self.backend.start_with_logs, name, argv, env=env, cwd=cwd, log_dir=self.dir
            )
        with self.phases.timed("spawn"):
            handle = self.names.start(name, start)
        self.workers[name] = handle
        if consumer is not None:
            # The oracle judges this worker's tokens and retries against its own ledger.
            n = next(i for i, (t, _) in enumerate(self.consumers, 2) if t is consumer)
            self.history.append(
                "supervisor",
                "note",
                worker=name,
                consumer=n,
                text=f"{name} works for consumer {n}, with a ledger of its own",
            )
        log = getattr(handle, "stderr_path", None)
        if log is not None:
            self.observer.follow_log(name, Path(log))
        return handle

    def provider_env(self, *, direct: bool = False) -> dict[str, str]:
        """The environment every process of the target gets: ours plus the trial's.

        Every provider's URL and kind; only the cell's provider goes through the trial's
        proxy (unless ``direct``), the others are always reached straight.
        """
        assert self.rendezvous is not None
        env = {k: v for k, v in os.environ.items() if k != "CRASHPOINT_RECOVERY"}
        for name, provider in self.providers.items():
            url = provider.url
            if name == self.provider_name and self.network is not None and not direct:
                url = self.network.provider_url or url
            env[provider_env_var(name)] = url
            env[provider_kind_var(name)] = provider.kind
        env["CRASHPOINT_FAILPOINTS"] = str(self.rendezvous.path)
        env[STATE_DIR] = str(self.dir)
        return env

    def hold(self, point: str, *, job: str | None = None, step: str | None = None) -> Gate:
        assert self.rendezvous is not None
        return self.rendezvous.hold(point, job=job, step=step)

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
            raise Inconclusive(f"{what} was never reached: {exc}") from exc
        finally:
            self.waits_s += time.monotonic() - t0  # the worker's time, not ours
        self.reached, self.reached_by = True, "failpoint"
        return hit

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

    def worker_pids(self) -> list[int]:
        """Every live worker's pid, its children's included."""
        pids = []
        for handle in self.workers.values():
            if handle.exited_at is None:
                pids += handle.tree()
        return pids

    def arm(self, fault: Fault) -> str:
        fault_id: str = self.client.arm(fault)
        self.history.append("supervisor", "note", job=fault.job, armed=fault.action)
        return fault_id

    def wait_held(self, fault_id: str, *, what: str, timeout_s: float | None = None) -> Any:
        t0 = time.monotonic()
        try:
            held = self._within_reach(lambda s: self.client.wait_held(fault_id, s), timeout_s)
        except RendezvousTimeout as exc:
            raise Inconclusive(f"{what} was never reached: {exc}") from exc
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

    def send(self, handle: WorkerHandle, sig: str) -> None:
        """Deliver ``sig`` to the worker's whole tree, recorded in the history."""
        # The backend records the signal in the history as it delivers it.
        signum = signal.Signals[sig]
        if signum == signal.SIGSTOP:
            handle.pause()
            self.paused.add(handle.name)
        elif signum == signal.SIGCONT:
            handle.resume()
            self.paused.discard(handle.name)
        else:
            handle.signal(signum)

    def stop_clear_of_write_locks(self, handle: WorkerHandle) -> None:
        """With ``handle`` just stopped: while one of its threads holds a write lock on
        a file (:mod:`harness.filelocks`), let it run for a moment and stop it again. A
        thread held at a boundary stays there; a background thread (a lease renewal)
        finishes its transaction. About 1 stop in 100 lands inside one
        for a lease renewed every sixth of a second, and then no worker could take over."""
        for _ in range(STOP_TRIES):
            held = held_write_locks(set(handle.tree()))
            if not held:
                return
            self.history.append(
                "supervisor",
                "note",
                text=f"{handle.name} was stopped holding a write lock on a file "
                f"({held[0]}): let run {LOCK_THAW_S * 1000:g} ms and stopped again",
            )
            self.send(handle, "SIGCONT")
            # A deliberate wait: the lock's holder needs a moment of CPU to let it go.
            time.sleep(LOCK_THAW_S)
            self.send(handle, "SIGSTOP")

    def crash(self, handle: WorkerHandle, sig: str, *, hit: Hit | None = None) -> bool:
        """Kill ``handle`` with ``sig``; True when it died at the boundary it was held at.

        A worker may handle SIGTERM by finishing what it holds: it is then let go from
        the boundary and given the SIGTERM grace (``TrialConfig.term_grace``) to exit
        before SIGKILL ends it; the history says when SIGTERM was not enough, and the
        trial knows the crash became a graceful stop.
        """
        sent = time.monotonic()
        self.send(handle, sig)
        at_boundary = True
        if sig != "SIGKILL" and self._wait_exit(handle, _DIED_AT_ONCE_S) is None:
            if hit is not None:
                hit.resume()
                at_boundary = False
            grace = self.config.term_grace
            if self._wait_exit(handle, max(0.0, sent + grace - time.monotonic())) is None:
                record_escalation(self.history, handle.name, handle.pid, sent=sig, grace_s=grace)
                self.send(handle, "SIGKILL")
        if self._wait_exit(handle, 5.0) is None:
            raise Inconclusive(f"worker {handle.name} survived SIGKILL")
        # The backend recorded the exit; say why it was not where the signal was aimed.
        if not at_boundary:
            self.history.append(
                "supervisor",
                "note",
                worker=handle.name,
                text=f"{handle.name} outlived {sig} at its boundary, so it was let go to stop",
            )
        return at_boundary

    def _wait_exit(self, handle: WorkerHandle, timeout_s: float) -> int | None:
        """``handle.wait``, counted as a wait: a worker finishing what it holds within its
        SIGTERM grace, or dying of a signal, takes the worker's time, not the harness's."""
        t0 = time.monotonic()
        try:
            return handle.wait(timeout_s)
        finally:
            self.waits_s += time.monotonic() - t0

    def sleep(self, seconds: float) -> None:
        """A deliberate wait (counted apart from the harness's own overhead)."""
        self._pause(seconds)

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` (ended early by the run's abort), counted as a wait: the
        time between two looks at the workers' progress, never the looking itself
        (:mod:`harness.phases` says what counts as overhead)."""
        t0 = time.monotonic()
        interrupted = self.abort.wait(seconds)
        self.waits_s += time.monotonic() - t0
        if interrupted:
            raise Inconclusive("interrupted")

    def wait_lease_out(self, job: str, *, leases: float) -> None:
        """Wait until ``job``'s lease has run out under a stopped owner.

        A target whose ledger tells the expiry (:class:`LeaseClock`) is waited on to that
        moment, read after the owner stopped (a stopped owner renews no more). Any other
        is given ``leases`` of its own lease: its clock and rounding are its own, so the
        margin is part of the wait.
        """
        assert self.target is not None
        if not isinstance(self.target, LeaseClock):
            self.sleep(self.config.lease_ttl_s * leases)
            return
        expires = self.target.lease_expires_at(job)
        if expires is not None:
            self.sleep(max(0.0, expires - time.monotonic()))

    def wait_quiescent(self, *, timeout_s: float | None = None) -> bool:
        """Poll until every job has ended at every consumer and nothing still acts on one.

        "Nothing acts" is read from the history where the target's ledger gives claims:
        no live worker is inside an attempt (:mod:`harness.attempts`), so the trial ends
        the moment the last one is over. Where that cannot be read (no claims as events,
        a second consumer's ledger, an attempt still open), the settle pause
        (``TrialConfig.settle_s``, the harness's own bound for every target) lets a
        straggler (a thawed owner, a late recovery) act; if it reopens a job, polling
        goes on until the bound.
        """
        bound = timeout_s or self.config.quiescence_timeout_s
        deadline = time.monotonic() + bound
        #: Read once the bound has passed: then the bound may have measured a machine
        #: whose workers waited for a CPU most of it (a runtime or an SDK to load at each
        #: start), and it is stretched by that wait, at most by itself (harness.reach).
        starved: CpuWait | None = None
        end = deadline
        with self.phases.timed("quiescence"):
            while True:
                now = time.monotonic()
                if now >= deadline:
                    if starved is None:
                        starved = CpuWait(self.worker_pids, from_birth=True)
                    end = deadline + min(starved.waited_s(), bound)
                    if now >= end or self.abort.is_set():
                        break
                if self._all_quiescent():
                    if self.nothing_in_flight():
                        self.quiet_deadline = None
                        return True
                    # A deliberate wait: nothing tells when a straggler is done.
                    self._pause(self.config.settle_s)
                    if self._all_quiescent():
                        self.quiet_deadline = None
                        return True
                    continue
                # The poll interval: the ledger (or a status command, itself paced) tells
                # no one when a job ends, so it is read again; each read is overhead.
                self._pause(QUIESCENCE_POLL_S)
            self.quiet_deadline = end
            return False

    def nothing_in_flight(self) -> bool:
        """True when the history shows that no live worker is inside an attempt; False
        when one is, or when the target's events cannot show it."""
        if self.consumers:
            return False  # a second consumer's ledger is not read as events
        self.observer.drain()
        events = self.history.events()
        if not reports_claims(events):
            return False
        # A stopped worker cannot act until it is resumed, and the driver waits then.
        alive = [
            name
            for name, h in self.workers.items()
            if h.exited_at is None and name not in self.paused
        ]
        return not open_attempts(events, alive)

    def wait_attempts_over(self, bound_s: float) -> None:
        """Wait until no live worker is inside an attempt, at most ``bound_s``: the
        whole bound where the history cannot show it."""
        deadline = time.monotonic() + bound_s
        while time.monotonic() < deadline and not self.nothing_in_flight():
            self._pause(min(QUIESCENCE_POLL_S, max(0.0, deadline - time.monotonic())))

    def _all_quiescent(self) -> bool:
        assert self.target is not None
        others = all(t.quiescent(jobs) for t, jobs in self.consumers)
        return others and self.target.quiescent(self.jobs)

    def add_consumer(self, job_id: str) -> TargetAdapter:
        """A second consumer given ``job_id`` too, with a ledger of its own (one message
        delivered to two subscribers); its workers call the same provider."""
        assert self.provider is not None
        sub = self.dir / f"consumer-{len(self.consumers) + 2}"
        sub.mkdir()
        other = self._make_target(sub)
        other.setup()
        other.attach_providers([p.client for p in self.providers.values()], self.provider_env())
        self.consumers.append((other, [job_id]))
        other.enqueue(job_id, self.provider_name, self.job_body(job_id))
        self.history.append("supervisor", "enqueue", job=job_id, consumer=len(self.consumers) + 1)
        return other

    # -- judgement ------------------------------------------------------------------------

    def facts(self, *, quiescent: bool, review_expected: frozenset[str]) -> TrialFacts:
        """What the oracle needs besides the history: the limits are the target's own."""
        assert self.target is not None
        states = self.target.job_states(self.jobs)
        last_window = None
        if not quiescent and self.quiet_deadline is not None:
            last_window = self.quiet_deadline - quiet_window_s(self.config.lease_ttl_s)
        return TrialFacts(
            jobs=list(self.jobs),
            provider_kinds={name: p.kind for name, p in self.providers.items()},
            job_states=None if states is None else list(states.values()),
            max_attempts=self.target.max_attempts,
            quiescent=quiescent,
            review_expected=review_expected,
            job_providers=dict.fromkeys(self.jobs, self.provider_name),
            last_window_from=last_window,
            job_steps=dict.fromkeys(self.jobs, self.steps) if self.steps else {},
            sensitive_values=self.sensitive_values(),
        )


def sensitive_stand_in(field: str, job_id: str) -> str:
    """What the harness puts into a field the target marks sensitive: shaped like the
    data it names (an address for an email field), unique to the job, and recognisable
    wherever it turns up again."""
    if "mail" in field.lower():
        return f"{field.replace('_', '.')}.{job_id}@customer.example"
    return f"secret-{field}-{job_id}"


def start_providers(
    declared: Mapping[str, str],
    trial_dir: Path,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    pool: ProviderPool | None = None,
) -> dict[str, ProviderProcess]:
    """Start one provider process per declared ``name -> kind``, side by side (each start
    is a process launch; in sequence they would add up on every trial). ``options`` adds
    start options by name (an MCP tool server's transport). With ``pool``, each is leased
    from it (fresh, warm if one was given back) instead; give them back with
    :func:`release_providers`."""

    def start(name: str) -> ProviderProcess:
        extra = dict((options or {}).get(name, {}))
        if pool is not None:
            return pool.lease(declared[name], name=name, **extra)
        state = trial_dir / f"provider-{provider_env_name(name).lower()}.db"
        return start_provider(declared[name], state_path=state, name=name, **extra)

    if len(declared) == 1:
        return {name: start(name) for name in declared}
    with ThreadPoolExecutor(max_workers=len(declared)) as threads:
        futures = {name: threads.submit(start, name) for name in declared}
    started = {n: f.result() for n, f in futures.items() if f.exception() is None}
    errors = [e for e in (f.exception() for f in futures.values()) if e is not None]
    if errors:
        release_providers(started, pool)
        raise errors[0]
    return started


def release_providers(
    providers: Mapping[str, ProviderProcess], pool: ProviderPool | None = None
) -> None:
    """Close each provider, or give it back to ``pool`` (which wipes it, or closes one
    that died, was restarted, or cannot be wiped)."""
    for provider in providers.values():
        with contextlib.suppress(Exception):
            if pool is not None:
                pool.give_back(provider)
            else:
                provider.close()
