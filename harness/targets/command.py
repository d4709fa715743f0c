"""Any worker, in any language, described by ``crashpoint.toml`` (the schema, its stable
keys and its checks are in :mod:`harness.targets.config`).

Arguments naming a file beside ``crashpoint.toml`` are made absolute, because the worker
runs in its own state directory: ``state/`` in the trial's directory, its working
directory and ``CRASHPOINT_STATE_DIR``, apart from the harness's files (provider
databases, the failpoint socket, worker logs, job payloads, snapshots), so a restore of
that directory puts back the worker's state and nothing of the harness's. A worker in the
target's own image (``[target.docker]`` under ``--backend docker``) gets its command as
written, since its paths are the image's (the enqueue and status commands run on the
host either way).

A job's end state comes from the declared ``status`` command: the trial ends as soon as
every job is final (and still is after the settle pause). The command is one process per
job, so it runs only for jobs not yet final, once the providers have been quiet for a
moment, at a modest interval. Without it the harness cannot tell a lost job from a slow
one: a trial then ends once every job has reached a provider and the providers have been
quiet for longer than a lease (a crashed worker's job is taken over only once its lease
has run out, so a shorter silence is not the end), and the oracle leaves ``nothing_lost``
unjudged, saying why.

The enqueue and status commands are the user's: when one fails, that is the
configuration's problem, so it is a :class:`ConfigError` (exit 2) naming the command and
the last lines it wrote to stderr (a traceback ends with its message; its first line
says nothing), never a trial verdict.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness.brokers import Broker
from harness.contract.env import FAILPOINTS, STATE_DIR, provider_env_var
from harness.contract.errors import ConfigError
from harness.history import Event
from harness.observe import ProviderLog
from harness.oracle import JobFinal
from harness.targets.base import Redelivery, quiet_window_s
from harness.targets.broker_commands import trial_broker
from harness.targets.command_calls import CommandCalls
from harness.targets.command_lifecycle import LifecycleCommands
from harness.targets.command_state import copy_state, replace_state, restore_unsupported
from harness.targets.config import (
    CommandConfig,
    JobStatus,
)
from harness.targets.progress import Activity, EndSource, JobEnds
from harness.targets.serve import ServedPool
from harness.targets.status_line import job_final

#: The status command runs once no request has reached a provider for this long ...
STATUS_QUIET_S = 0.1
#: ... and at most once per job in this interval.
STATUS_POLL_S = 0.15
#: ... or this, once the workers are known to send job-end events (docs/failpoints.md).
JOB_END_POLL_S = 1.0


class CommandAdapter(LifecycleCommands):
    """A :class:`~harness.targets.base.TargetAdapter` for a worker described by a config."""

    #: A second delivery is the same job enqueued again into the same target.
    redelivery: Redelivery = "enqueue_again"

    def __init__(
        self,
        config: CommandConfig,
        *,
        trial_dir: Path,
        in_image: bool = False,
        pool: ServedPool | None = None,
    ) -> None:
        self.provider_name = config.providers[0].name
        state = trial_dir / "state"
        self._calls = CommandCalls(config, state_dir=state, trial_dir=trial_dir, pool=pool)
        self.steps = config.steps
        self.max_attempts = config.max_attempts
        self.poll_s = config.poll_s
        self.min_backoff_s = config.min_backoff_s
        self.visibility_s = config.visibility_s
        self.sensitive_fields = config.sensitive_fields
        self.trial_dir = trial_dir
        self.state_dir = trial_dir / "state"
        self.jobs_dir = trial_dir / "jobs"
        #: The workers run in the target's own image: their argv is the image's, as written.
        self.in_image = in_image
        self.env: dict[str, str] = {}
        self._lease_ttl_s = config.lease_ttl_s
        #: The workers' settings (all but their id), which the status command gets too.
        self._settings: dict[str, str] = {}
        self._activity = Activity()
        self._ends = JobEnds(self._activity)
        #: When the providers last went quiet (a worker start or a restore counts too).
        self._quiet_since: float | None = None
        self._last_activity = 0.0
        #: Each job's last reported state, and when it was read.
        self._states: dict[str, tuple[JobFinal, float]] = {}
        # Due at once: the monotonic clock is still near 0.0 on a machine booted minutes ago.
        self._last_poll = -math.inf
        #: The last answer was "all final": the next one reads every job again.
        self._all_final = False
        self._snapshots = 0
        #: The trial's own broker (``[target.broker]``), started with the trial. Outside
        #: the state directory: a restore of the worker's state leaves the broker's queue
        #: as it is, as it would a real one.
        self.broker: Broker | None = trial_broker(
            config.broker, trial_dir / "broker", config_path=config.path, resolve=self._abs
        )
        self.refused: set[str] = set()

    @property
    def config(self) -> CommandConfig:
        """The target's configuration (the calls read the same one)."""
        return self._calls.config

    @config.setter
    def config(self, value: CommandConfig) -> None:
        self._calls.config = value

    def _abs(self, args: Iterable[str]) -> list[str]:
        return self._calls.abs(args)

    def providers(self, kind: str) -> Sequence[tuple[str, str]]:
        """The declared providers; the cell names which of them its faults aim at."""
        del kind
        return [(p.name, p.kind) for p in self.config.providers]

    def provider_options(self) -> Mapping[str, Mapping[str, Any]]:
        """How each declared provider starts besides its kind: its persona (``kind =
        "stripe"``: the idempotent kind speaking Stripe's API), or its transport (a
        provider with ``transport = "mcp"`` is a tool server)."""
        return {p.name: p.start_options() for p in self.config.providers if p.start_options()}

    def url_aliases(self, env: Mapping[str, str]) -> dict[str, str]:
        """The ``[[providers]] env`` variables for a worker whose environment is ``env``:
        each the SDK's base URL (a persona's suffix added) of the URL the worker gets in
        ``CRASHPOINT_PROVIDER_<NAME>_URL``, proxied or not, so the two always agree."""
        out: dict[str, str] = {}
        for p in self.config.providers:
            url = env.get(provider_env_var(p.name))
            if url is not None:
                out |= p.env_alias(url)
        return out

    def setup(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        if self.broker is not None:
            self.broker.start()

    def broker_env(self) -> dict[str, str]:
        """``{[target.broker] env: its URL}`` for every process of the target."""
        if self.broker is None or self.config.broker is None or not self.broker.port:
            return {}
        return {self.config.broker.env: self.broker.url}

    def attach_providers(self, providers: Sequence[ProviderLog], env: Mapping[str, str]) -> None:
        self._activity.attach(providers)
        self.env = dict(env)

    def _command_env(self) -> dict[str, str]:
        """Where the enqueue and status commands run: the workers' environment, without
        the failpoint socket (delivering or asking about a job is not a boundary, and a
        command that shares the worker's code must never block on a hold meant for a
        worker)."""
        env = {**(self.env or os.environ), **self._settings, STATE_DIR: str(self.state_dir)}
        env.pop(FAILPOINTS, None)
        env.update(self.broker_env())
        return env | self.url_aliases(env)

    def enqueue(
        self,
        job_id: str,
        provider: str,
        body: Mapping[str, Any],
        *,
        steps: Sequence[tuple[str, str]] = (),
    ) -> bool:
        payload = self._payload_file(job_id)
        doc: dict[str, Any] = {"job_id": job_id, "provider": provider, "body": body}
        if steps:
            # A multi-step job: each step's effect at its own provider, in this order.
            doc["steps"] = [{"name": name, "provider": p} for name, p in steps]
        payload.write_text(json.dumps(doc))
        self._ends.enqueued(job_id)  # an end announced before now is not this delivery's
        refused = self._calls.enqueue(job_id, doc, self._command_env())
        if refused:
            self.refused.add(job_id)
        else:
            self.refused.discard(job_id)
        self._went_active()
        return refused

    def redeliver(
        self,
        job_id: str,
        provider: str,
        body: Mapping[str, Any],
        *,
        steps: Sequence[tuple[str, str]] = (),
    ) -> bool:
        """The target's own queue delivers the job again: its enqueue command, once more."""
        self.enqueue(job_id, provider, body, steps=steps)
        return True

    def job_status(self, job_id: str) -> JobStatus | None:
        """The job's state from the declared ``status`` command; None when none is declared.

        It runs where the workers run, with their environment, but without the failpoint
        socket (see :meth:`_command_env`).
        """
        if not self.config.has_status:
            return None
        return self._calls.status(job_id, self._command_env())

    def _payload_file(self, job_id: str) -> Path:
        return self._calls.payload_file(job_id)

    def worker_argv(self, role: str | None = None) -> list[str]:
        """The worker's ``command``, or (``role="relay"``) its declared ``relay``."""
        argv = self.config.relay if role == "relay" and self.config.relay else self.config.command
        if self.in_image:
            return list(argv)
        return self._abs(argv)

    def worker_env(
        self,
        worker_id: str,
        *,
        mutant: str | None,
        lease_ttl_s: float,
        http_timeout_s: float,
    ) -> dict[str, str]:
        del mutant
        self._lease_ttl_s = lease_ttl_s
        # The trial's lease (crashpoint.toml's, unless --lease-ttl-s overrides it): the
        # scenarios time their waits by it, so the worker must use the same one. The HTTP
        # timeout is offered, derived from that lease; a worker may keep its own.
        env = {
            "CRASHPOINT_WORKER_ID": worker_id,
            STATE_DIR: str(self.state_dir),
            "CRASHPOINT_LEASE_TTL_S": str(lease_ttl_s),
            "CRASHPOINT_HTTP_TIMEOUT_S": str(http_timeout_s),
            **self.broker_env(),
        }
        if self.config.max_attempts is not None:
            # The worker's own declared cap; without one it is told none (never ours).
            env["CRASHPOINT_MAX_ATTEMPTS"] = str(self.config.max_attempts)
        if self.config.ledger_dsn is not None:
            env["CRASHPOINT_LEDGER_DSN"] = self.config.ledger_dsn
        if self.config.poll_s is not None:
            # Its own declared poll, as with the lease: what the harness waits by is what
            # the worker is told to run with.
            env["CRASHPOINT_POLL_S"] = str(self.config.poll_s)
        self._settings = {k: v for k, v in env.items() if k != "CRASHPOINT_WORKER_ID"}
        # Served commands start with the first worker: their start-ups overlap.
        self._calls.start(self._command_env())
        self._went_active()  # a worker starting now may act only after its start-up
        return env

    def ledger_dsn(self) -> str | None:
        dsn = self.config.ledger_dsn
        return dsn if dsn is not None and dsn.startswith("postgresql") else None

    # -- the end of a trial -------------------------------------------------------------

    def _went_active(self) -> None:
        self._quiet_since = None
        self._all_final = False

    def _quiet_for(self) -> float:
        """Seconds since the last arrival (or start, enqueue, restore); 0.0 if just now."""
        now = time.monotonic()
        if self._activity.arrived():
            self._last_activity = now
            self._went_active()
        if self._quiet_since is None:
            self._quiet_since = now
        return now - self._quiet_since

    def quiescent(self, jobs: Iterable[str]) -> bool:
        """Every job is final by the status command, or, without one, every job has
        reached a provider and none has been reached for longer than a lease."""
        wanted = list(jobs)
        quiet_s = self._quiet_for()
        ended = self._ends.ended(wanted) if quiet_s >= STATUS_QUIET_S else set()
        if quiet_s >= STATUS_QUIET_S and ended >= set(wanted):
            # Every worker said so, after all that could reopen a job: no poll needed.
            return True
        if not self.config.has_status:
            touched = set(wanted) <= self._activity.touched
            return touched and quiet_s >= quiet_window_s(self._lease_ttl_s)
        # Workers that announce their jobs' ends leave the status command a fallback (a
        # worker killed between its durable end and the event never sends one): rarer.
        every = JOB_END_POLL_S if self._ends.heard_any() else STATUS_POLL_S
        # Asked again after a settle pause, which stood in for the interval.
        again = self._all_final
        if quiet_s < STATUS_QUIET_S or (not again and time.monotonic() - self._last_poll < every):
            return False
        if again:
            # Every job is read afresh, so one the pause reopened is seen, and "final" is
            # what the worker says now.
            self._states.clear()
        rest = [j for j in wanted if j not in ended]
        self._poll(rest)
        self._all_final = all(self._states[j][0].final for j in rest)
        return self._all_final

    def _poll(self, jobs: Iterable[str], *, fresh_after: float = 0.0) -> None:
        """Run the status command for every job not known final (or read before
        ``fresh_after``), side by side: each is a process start, and in sequence they
        would add up on every poll."""
        todo = []
        for job in jobs:
            known = self._states.get(job)
            if known is None or not known[0].final or known[1] <= fresh_after:
                todo.append(job)
        read_at = time.monotonic()  # a state is as old as the moment it was asked for
        statuses: list[JobStatus | None] = []
        if len(todo) == 1:
            statuses = [self.job_status(todo[0])]
        elif todo:
            with ThreadPoolExecutor(max_workers=len(todo)) as pool:
                statuses = list(pool.map(self.job_status, todo))
        for job, status in zip(todo, statuses, strict=True):
            assert status is not None
            self._states[job] = (job_final(job, status), read_at)
        self._last_poll = time.monotonic()

    def job_states(self, jobs: Iterable[str]) -> dict[str, JobFinal] | None:
        """Each job's state by the status command (None without one); a state read
        before the providers last saw a request is read again."""
        if not self.config.has_status:
            return None
        wanted = list(jobs)
        self._quiet_for()
        self._poll(wanted, fresh_after=self._last_activity)
        return {j: self._states[j][0] for j in wanted}

    def command_pids(self) -> list[int]:
        """The served commands' processes: their CPU wait stretches the trial's bounds."""
        return self._calls.pids()

    def command_startups(self) -> dict[str, float]:
        """How long each served command took to start (``serve_enqueue_ready_s``)."""
        return self._calls.startups()

    def hear_job_ends(self, source: EndSource) -> None:
        """The trial's job-end events (the rendezvous's), read at each quiescence check."""
        self._ends.hear(source)

    def ledger_events(self) -> list[Event]:
        return []

    def twin(self) -> CommandAdapter:
        """Each enqueue is its own process: one adapter serves concurrent triggers."""
        return self

    # -- state_store_restore --------------------------------------------------------------

    def snapshot(self) -> Path:
        """A copy of the worker's state directory, taken while no worker runs.

        SQLite in WAL mode included: with no process holding the database open, the
        ``-wal`` and ``-shm`` files copied beside it are exactly the state the next
        opener recovers, so a copy of all three is consistent (a live writer could tear it).
        """
        why = restore_unsupported(self.config)
        if why is not None:
            raise ConfigError(why)
        self._snapshots += 1
        self._calls.close()  # a served command may hold the state open: it restarts on use
        return copy_state(self.state_dir, self.trial_dir / "snapshots" / f"{self._snapshots}")

    def restore(self, snapshot: Any) -> None:
        """Replace the state directory's contents with ``snapshot``; no worker runs."""
        self._calls.close()
        self._ends.restored()
        replace_state(self.state_dir, Path(snapshot))
        self._states.clear()
        self._went_active()

    def close(self) -> None:
        self._calls.close()  # stdin closed, then SIGTERM, then SIGKILL
        if self.broker is not None:
            self.broker.close()
