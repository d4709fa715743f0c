"""Any worker, in any language, described by ``crashpoint.toml`` (the schema, its stable
keys and its checks are in :mod:`harness.targets.config`).

Arguments naming a file beside ``crashpoint.toml`` are made absolute, because the worker
runs in the trial's fresh state directory; a worker in the target's own image
(``[target.docker]`` under ``--backend docker``) gets its command as written, since its
paths are the image's (the enqueue and status commands run on the host either way).
Without a ledger the oracle judges from provider truth alone, and a trial is quiescent
once every job has an effect and the provider has been quiet for longer than a lease (a
crashed worker's job is taken over only once its lease has run out, so a shorter silence
is not the end).

The enqueue and status commands are the user's: when one fails, that is the
configuration's problem, so it is a :class:`ConfigError` (exit 2) naming the command and
the first line it wrote to stderr, never a trial verdict.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.contract.env import FAILPOINTS
from harness.contract.errors import ConfigError
from harness.history import Event
from harness.oracle import JobFinal
from harness.targets.config import (
    CommandConfig,
    JobStatus,
    ProviderDecl,
    load_config,
    parse_status_line,
)

# The schema used to live here; the run command still imports it from this module.
__all__ = ["CommandAdapter", "CommandConfig", "JobStatus", "ProviderDecl", "load_config"]
ENQUEUE_TIMEOUT_S = 10.0
STATUS_TIMEOUT_S = 10.0
#: No arrival for this long (with every job served) counts as quiet ...
QUIET_S = 0.3
#: ... and for this many leases: a recovering worker acts only after a lease expires.
QUIET_LEASES = 1.5


class CommandAdapter:
    """A :class:`~harness.target.TargetAdapter` for a worker described by a config."""

    def __init__(self, config: CommandConfig, *, state_dir: Path, in_image: bool = False) -> None:
        self.provider_name = config.providers[0].name
        self.config = config
        self.state_dir = state_dir
        #: The workers run in the target's own image: their argv is the image's, as written.
        self.in_image = in_image
        self.client: Any = None
        self.env: dict[str, str] = {}
        self._last_arrivals = -1
        self._quiet_since = 0.0
        self._lease_ttl_s = config.lease_ttl_s
        #: The workers' settings (all but their id), which the status command gets too.
        self._settings: dict[str, str] = {}

    def _abs(self, args: Iterable[str]) -> list[str]:
        out = []
        for a in args:
            beside = self.config.base_dir / a
            out.append(str(beside) if not a.startswith("-") and beside.exists() else a)
        return out

    def setup(self) -> None:
        (self.state_dir / "jobs").mkdir(parents=True, exist_ok=True)

    def attach_provider(self, client: Any, env: Mapping[str, str]) -> None:
        self.client = client
        self.env = dict(env)

    def enqueue(self, job_id: str, provider: str, body: Mapping[str, Any]) -> None:
        payload = self._payload_file(job_id)
        payload.write_text(json.dumps({"job_id": job_id, "provider": provider, "body": body}))
        self._run(
            "enqueue",
            self.config.enqueue,
            job_id,
            env=self.env,
            timeout_s=ENQUEUE_TIMEOUT_S,
            fix="make it exit 0 once the job is queued",
        )

    def job_status(self, job_id: str) -> JobStatus | None:
        """The job's state from the declared ``status`` command; None when none is declared.

        It runs where the workers run, with their environment, but without the failpoint
        socket: asking about a job is not a boundary, and a status command that shares
        the worker's code must never block on a hold meant for a worker.
        """
        if self.config.status is None:
            return None
        env = {**(self.env or os.environ), **self._settings}
        env.pop(FAILPOINTS, None)
        done = self._run(
            "status",
            self.config.status,
            job_id,
            env=env,
            timeout_s=STATUS_TIMEOUT_S,
            fix='make it print one line like {"state": "pending"} and exit 0',
        )
        try:
            return parse_status_line(done.stdout.decode(errors="replace"))
        except ValueError as exc:
            raise self._command_error(
                "status",
                done,
                str(exc),
                'print one line like {"state": "done", "attempts": 1}',
            ) from None

    def _payload_file(self, job_id: str) -> Path:
        return self.state_dir / "jobs" / f"{job_id}.json"

    def _run(
        self,
        key: str,
        template: tuple[str, ...],
        job_id: str,
        *,
        env: Mapping[str, str],
        timeout_s: float,
        fix: str,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a per-job command template in the state directory; ConfigError if it fails."""
        fields = {"job_id": job_id, "payload_file": str(self._payload_file(job_id))}
        argv = self._abs(a.format(**fields) for a in template)
        where = f"{self.config.path}: target.{key} command `{shlex.join(argv)}`"
        try:
            done = subprocess.run(
                argv,
                cwd=self.state_dir,
                env=dict(env) or None,
                capture_output=True,
                timeout=timeout_s,
                check=False,
            )
        except OSError as exc:
            raise ConfigError(
                f"{where} cannot start ({exc.strerror or exc}); check the program's name"
            ) from None
        except subprocess.TimeoutExpired:
            raise ConfigError(f"{where} ran past {timeout_s:.0f} s; {fix}") from None
        if done.returncode != 0:
            raise self._command_error(key, done, f"exited {done.returncode}", fix)
        return done

    def _command_error(
        self, key: str, done: subprocess.CompletedProcess[bytes], what: str, fix: str
    ) -> ConfigError:
        argv = [str(a) for a in done.args]
        lines = [ln.strip() for ln in done.stderr.decode(errors="replace").splitlines()]
        first = next((ln for ln in lines if ln), None)
        said = f" (stderr: {first[:200]})" if first else " (nothing on stderr)"
        return ConfigError(
            f"{self.config.path}: target.{key} command `{shlex.join(argv)}` {what}{said}; {fix}"
        )

    def worker_argv(self) -> list[str]:
        if self.in_image:
            return list(self.config.command)
        return self._abs(self.config.command)

    def worker_env(
        self,
        worker_id: str,
        *,
        mutant: str | None,
        lease_ttl_s: float,
        http_timeout_s: float,
        max_attempts: int,
    ) -> dict[str, str]:
        del mutant
        self._lease_ttl_s = lease_ttl_s
        # The trial's lease (crashpoint.toml's, unless --lease-ttl-s overrides it): the
        # scenarios time their waits by it, so the worker must use the same one.
        env = {
            "CRASHPOINT_WORKER_ID": worker_id,
            "CRASHPOINT_STATE_DIR": str(self.state_dir),
            "CRASHPOINT_LEASE_TTL_S": str(lease_ttl_s),
            "CRASHPOINT_HTTP_TIMEOUT_S": str(http_timeout_s),
            "CRASHPOINT_MAX_ATTEMPTS": str(max_attempts),
        }
        if self.config.max_attempts is not None:
            # The worker's own declared cap, never a figure borrowed from the reference.
            env["CRASHPOINT_MAX_ATTEMPTS"] = str(self.config.max_attempts)
        if self.config.ledger_dsn is not None:
            env["CRASHPOINT_LEDGER_DSN"] = self.config.ledger_dsn
        self._settings = {k: v for k, v in env.items() if k != "CRASHPOINT_WORKER_ID"}
        return env

    def ledger_dsn(self) -> str | None:
        dsn = self.config.ledger_dsn
        return dsn if dsn is not None and dsn.startswith("postgresql") else None

    def quiescent(self, jobs: Iterable[str]) -> bool:
        """Every job has an effect, and no request arrived for longer than a lease."""
        if self.client is None:
            return False
        wanted = set(jobs)
        served = {e.job_id for e in self.client.effects()}
        arrivals = len(self.client.arrivals())
        now = time.monotonic()
        if arrivals != self._last_arrivals:
            self._last_arrivals, self._quiet_since = arrivals, now
            return False
        quiet_s = max(QUIET_S, QUIET_LEASES * self._lease_ttl_s)
        return wanted <= served and now - self._quiet_since >= quiet_s

    def ledger_jobs(self) -> list[JobFinal] | None:
        return None

    def ledger_events(self) -> list[Event]:
        return []

    def twin(self) -> CommandAdapter:
        """Each enqueue is its own process: one adapter serves concurrent triggers."""
        return self

    def snapshot(self) -> Any:
        raise ConfigError("state_store_restore needs the reference target's ledger")

    def restore(self, snapshot: Any) -> None:
        raise ConfigError("state_store_restore needs the reference target's ledger")

    def close(self) -> None:
        return None
