"""What one trial holds (its cell, settings, history, state directory, providers,
target, rendezvous, workers) and its lifecycle: set up, stop, record, tear down.

The verbs drivers are written in are mixed in on top (:mod:`.jobs`, :mod:`.workers`,
:mod:`.faults`, :mod:`.quiescence`); :class:`harness.trial.Trial` is all of them.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fake_providers import Fault, ProviderPool, ProviderProcess
from harness.backends.base import Backend, WorkerHandle
from harness.contract.env import STATE_DIR, provider_env_var, provider_kind_var
from harness.contract.errors import ConfigError, Inconclusive
from harness.history import Event, History
from harness.lanes import WorkerNames
from harness.observe import Observer
from harness.oracle import TrialFacts
from harness.phases import Phases
from harness.plan import Cell
from harness.providers import ProviderControl
from harness.rendezvous import Rendezvous
from harness.targets.base import (
    CommandProcesses,
    HearsJobEnds,
    TargetAdapter,
    quiet_window_s,
)
from harness.trial.config import TrialConfig
from harness.trial.kept import keep_copy
from harness.trial.providers import release_providers, start_providers
from harness.watchdog import Watchdog

if TYPE_CHECKING:
    from harness.ledger_server import LedgerServerWatch
    from harness.network.seam import NetworkSeam

#: The reference worker's provider name; a command target names its own.
PROVIDER_NAME = "svc"
#: How many retried opening asks a model persona re-plans in one trial: all of them.
REPLANS = 10_000


class TrialState:
    """The state of one running trial and its lifecycle."""

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
        #: The run's PostgreSQL ledger server, watched for a restart under this trial
        #: (set by :meth:`harness.infra.RunInfra.open_trial`); None: no such server.
        self.ledger_server: LedgerServerWatch | None = None
        self.reached = False
        #: How the cell was reached: at a failpoint (exactly), at a provider hold (black
        #: box), or None (by the harness's own action, or not at all).
        self.reached_by: str | None = None
        #: What the cell exercised, when its driver knows better than how it was reached
        #: (a duplicate the queue refused, a redelivery nobody took up).
        self.exercised: str | None = None
        self.waits_s = 0.0
        #: The harness's own steps, timed (results.json ``timings``, ``nox -s bench``).
        self.phases = Phases()
        # Short paths: the failpoint socket lives here and UNIX socket paths are short.
        base = config.workdir or Path(tempfile.gettempdir())
        base.mkdir(parents=True, exist_ok=True)
        self.dir = fresh_dir(base, watchdog)  # removed even if the harness is SIGKILLed
        self._make_target = make_target
        #: The run's warm providers; none when the trial's directory is kept, so each
        #: provider's log stays in it.
        self._pool = None if config.keep_dirs else provider_pool
        #: Where this trial's state directory is copied at teardown (it did not hold and
        #: the run keeps such states); None: it goes with the trial.
        self.kept_state: Path | None = None
        self._empty_parts()

    def _empty_parts(self) -> None:
        """What :meth:`setup` and the verbs fill in: empty until then."""
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

    def setup(self) -> None:
        """The trial's target, providers, rendezvous, ledger and proxies, in that order."""
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
        self._start_providers(declared)
        with self.phases.timed("rendezvous"):
            self.rendezvous = Rendezvous(
                str(self.dir / "failpoints.sock"),
                history=self.history,
                names=self.names.name_of,
                step_providers=self._step_providers(declared),
            )
        broker = getattr(self.target, "broker", None)
        if broker is not None:
            broker.watchdog = self.watchdog  # a trial's broker goes with its workers
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
        if isinstance(self.target, HearsJobEnds):
            self.target.hear_job_ends(self.rendezvous.job_ends)

    def _start_providers(self, declared: dict[str, str]) -> None:
        """Start (or lease) the ``declared`` providers, configured for the cell, and watch
        each one's arrivals and effects."""
        assert self.target is not None
        with self.phases.timed("provider"):
            self.providers = start_providers(
                declared, self.dir, self.target.provider_options(), pool=self._pool
            )
        for name, provider in self.providers.items():
            if provider.persona == "openai":
                # A model re-plans: every retried job's plan comes in other words (tool
                # call ids, argument order; docs/providers.md, "Re-plans"), so a runtime
                # that keys an effect by the plan is caught wherever a job is retried.
                provider.client.arm(Fault("replan", times=REPLANS))
                self.history.append(f"provider:{name}", "note", armed="replan")
        self.provider = self.providers[self.provider_name]
        self.provider_url = self.provider.worker_url
        for name, provider in self.providers.items():
            self.observer.watch_provider(provider.client)
            if provider.transport == "mcp":
                # What each tool declares, as its clients read it: the oracle holds the
                # annotations to what the provider then does (tool_annotations).
                self.history.append(f"provider:{name}", "tools", tools=provider.client.tools())

    def _step_providers(self, declared: Mapping[str, str]) -> dict[str, str]:
        """What a failpoint line's ``step`` says of the provider its call goes to: a
        declared step's provider, or the provider a step is named after."""
        assert self.target is not None
        return {**{name: name for name in declared}, **dict(self.target.steps), **dict(self.steps)}

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

    def keep_state(self, verdict: str) -> None:
        """Keep the state directory at teardown when the run asks for it and the trial
        did not hold (its result then names where)."""
        where = self.config.keep_state_in
        if where is not None and verdict != "held":
            self.kept_state = where / f"{self.cell.id}.seed-{self.seed}"

    def _teardown(self) -> None:
        self.stop()
        for target in (self.target, *(t for t, _ in self.consumers)):
            if target is not None:
                with contextlib.suppress(Exception):
                    target.close()
        if self.kept_state is not None:
            keep_copy(self.dir, self.kept_state)
        if not self.config.keep_dirs:
            shutil.rmtree(self.dir, ignore_errors=True)
            if self.dir.exists():  # a file made while it went leaves it behind: once more
                shutil.rmtree(self.dir, ignore_errors=True)
        if self.watchdog is not None and (self.config.keep_dirs or not self.dir.exists()):
            # Still there, it stays the watchdog's, which removes it when the run ends (a
            # trial dir once outlived a run stopped by SIGTERM on a machine under stress).
            self.watchdog.forget_dir(self.dir)
        if self.network is not None:
            # The trial's proxies go with it (the run's server stays).
            with contextlib.suppress(Exception):
                self.network.close()

    @property
    def client(self) -> ProviderControl:
        assert self.provider is not None
        return self.provider.client

    def provider_env(self, *, direct: bool = False) -> dict[str, str]:
        """The environment every process of the target gets: ours plus the trial's.

        Every provider's URL and kind; only the cell's provider goes through the trial's
        proxy (unless ``direct``), the others are always reached straight.
        """
        assert self.rendezvous is not None
        env = {k: v for k, v in os.environ.items() if k != "CRASHPOINT_RECOVERY"}
        for name, provider in self.providers.items():
            url = provider.worker_url
            if name == self.provider_name and self.network is not None and not direct:
                url = self.network.provider_url or url
            env[provider_env_var(name)] = url
            env[provider_kind_var(name)] = provider.kind
        env["CRASHPOINT_FAILPOINTS"] = str(self.rendezvous.path)
        env[STATE_DIR] = str(self.dir)
        return env

    def worker_pids(self) -> list[int]:
        """Every live worker's pid, its children's included."""
        pids = []
        for handle in self.workers.values():
            if handle.exited_at is None:
                pids += handle.tree()
        return pids

    def target_pids(self) -> list[int]:
        """The workers' pids and the target's served commands' (docs/getting-started.md)."""
        pids = self.worker_pids()
        if isinstance(self.target, CommandProcesses):
            pids += self.target.command_pids()
        return pids

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

    def sensitive_values(self) -> dict[str, str]:
        """Each stand-in value the jobs' sensitive fields were given, to its field."""
        fields = self.target.sensitive_fields if self.target is not None else ()
        return {sensitive_stand_in(f, job): f for job in self._bodies for f in fields}

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
            min_backoff_s=self.target.min_backoff_s,
        )


def sensitive_stand_in(field: str, job_id: str) -> str:
    """What the harness puts into a field the target marks sensitive: shaped like the
    data it names (an address for an email field), unique to the job, and recognisable
    wherever it turns up again."""
    if "mail" in field.lower():
        return f"{field.replace('_', '.')}.{job_id}@customer.example"
    return f"secret-{field}-{job_id}"


def fresh_dir(base: Path, watchdog: Watchdog | None, *, prefix: str = "cp-") -> Path:
    """A new directory under ``base``, given to the watchdog before it exists: a SIGTERM
    raised in this thread between the two would otherwise leave one nobody removes (a
    trial directory once outlived a run stopped so on a machine under stress)."""
    while True:
        path = base / f"{prefix}{secrets.token_hex(6)}"
        if watchdog is not None:
            watchdog.watch_dir(path)
        try:
            path.mkdir(mode=0o700)
            return path
        except FileExistsError:
            if watchdog is not None:
                watchdog.forget_dir(path)  # another's: never ours to remove
