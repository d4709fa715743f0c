"""A command target's enqueue and status calls, one-shot or served.

One-shot (``enqueue``, ``status``): one process per call, its arguments filled per job,
run to the harness's bound (:mod:`harness.targets.bounded`). Served (``[target.serve]``):
one long-lived process per command and trial (or per run, shared through the run's
:class:`ServedPool`), one JSON line per call (:mod:`harness.targets.serve`). Either way a
failure is the user's configuration's, a :class:`ConfigError` naming the command and the
last lines it wrote to stderr.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.contract.errors import ConfigError
from harness.targets.bounded import Overran, run_bounded
from harness.targets.command_output import refused_line, stderr_tail
from harness.targets.config import CommandConfig, JobStatus, parse_status_line
from harness.targets.serve import Served, ServedPool, ServeError

ENQUEUE_TIMEOUT_S = 10.0
STATUS_TIMEOUT_S = 10.0
ENQUEUE_FIX = "make it exit 0 once the job is queued"
STATUS_FIX = 'make it print one line like {"state": "pending"} and exit 0'


class CommandCalls:
    """The target's enqueue and status commands, in whichever form it declares."""

    def __init__(
        self,
        config: CommandConfig,
        *,
        state_dir: Path,
        trial_dir: Path,
        pool: ServedPool | None = None,
    ) -> None:
        self.config = config
        self.state_dir = state_dir
        self.jobs_dir = trial_dir / "jobs"
        where = str(config.path)
        #: Each request names its trial: the process may serve others (scope = "run").
        self.per_run = config.serve_scope == "run"
        #: The run's processes, which this trial uses but never stops.
        self.shared = pool is not None and self.per_run
        self.served: dict[str, Served] = {}
        for op, argv in config.serve.items():
            if self.shared:
                assert pool is not None
                self.served[op] = pool.get(op, self.abs(argv), cwd=config.base_dir, where=where)
            else:
                log = trial_dir / f"serve-{op}.log"
                self.served[op] = Served(
                    op,
                    self.abs(argv),
                    cwd=state_dir,
                    log=log,
                    where=where,
                    scope=config.serve_scope,
                )

    def abs(self, args: Iterable[str]) -> list[str]:
        """Arguments naming a file beside the configuration, made absolute."""
        out = []
        for a in args:
            beside = self.config.base_dir / a
            out.append(str(beside) if not a.startswith("-") and beside.exists() else a)
        return out

    def payload_file(self, job_id: str) -> Path:
        return self.jobs_dir / f"{job_id}.json"

    def start(self, env: Mapping[str, str]) -> None:
        """Start every served command now, so its start-up overlaps the workers'."""
        for served in self.served.values():
            served.start(self._spawn_env(env))

    def close(self) -> None:
        """Stop this trial's served commands; the run's go on for its other trials."""
        if self.shared:
            return
        for served in self.served.values():
            served.close()

    def request(
        self, served: Served, doc: dict[str, Any], env: Mapping[str, str], timeout_s: float
    ) -> dict[str, Any]:
        """One request; with scope = "run", naming the trial's directory and variables."""
        if self.per_run:
            doc["cwd"] = str(self.state_dir)
            doc["env"] = {k: v for k, v in env.items() if os.environ.get(k) != v}
        return served.request(doc, self._spawn_env(env), timeout_s)

    def _spawn_env(self, env: Mapping[str, str]) -> Mapping[str, str]:
        """What a served process starts with: the run's own start with the harness's
        environment, since each request brings its trial's."""
        return os.environ if self.shared else env

    def startups(self) -> dict[str, float]:
        """Seconds from each served command's start to its handshake, by timing key."""
        return {
            f"serve_{op}_ready_s": s.ready_s
            for op, s in self.served.items()
            if s.ready_s is not None
        }

    def pids(self) -> list[int]:
        """The served commands' running processes."""
        return [pid for s in self.served.values() if (pid := s.pid) is not None]

    def enqueue(self, job_id: str, doc: Mapping[str, Any], env: Mapping[str, str]) -> bool:
        """Put ``job_id`` in the target's queue; True when the queue said it refused it
        (``{"queued": false}``: it holds that job already)."""
        served = self.served.get("enqueue")
        if served is not None:
            reply = self.request(
                served,
                {"op": "enqueue", "job": dict(doc), "payload_file": str(self.payload_file(job_id))},
                env,
                ENQUEUE_TIMEOUT_S,
            )
            return reply.get("queued") is False
        done = self.run("enqueue", self.config.enqueue, job_id, env, ENQUEUE_TIMEOUT_S, ENQUEUE_FIX)
        return refused_line(done.stdout)

    def status(self, job_id: str, env: Mapping[str, str]) -> JobStatus:
        served = self.served.get("status")
        if served is not None:
            reply = self.request(served, {"op": "status", "job_id": job_id}, env, STATUS_TIMEOUT_S)
            try:
                return parse_status_line(_one_line(reply))
            except ValueError as exc:
                raise ServeError(f"{served.where} {exc}; {STATUS_FIX}") from None
        assert self.config.status is not None
        done = self.run("status", self.config.status, job_id, env, STATUS_TIMEOUT_S, STATUS_FIX)
        try:
            return parse_status_line(done.stdout.decode(errors="replace"))
        except ValueError as exc:
            raise command_error(
                self.config,
                "status",
                done,
                str(exc),
                'print one line like {"state": "done", "attempts": 1}',
            ) from None

    def run(
        self,
        key: str,
        template: tuple[str, ...],
        job_id: str,
        env: Mapping[str, str],
        timeout_s: float,
        fix: str,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a per-job command template in the state directory; ConfigError if it fails."""
        fields = {"job_id": job_id, "payload_file": str(self.payload_file(job_id))}
        argv = self.abs(a.format(**fields) for a in template)
        where = f"{self.config.path}: target.{key} command `{shlex.join(argv)}`"
        try:
            done = run_bounded(argv, cwd=self.state_dir, env=dict(env) or None, timeout_s=timeout_s)
        except OSError as exc:
            raise ConfigError(
                f"{where} cannot start ({exc.strerror or exc}); check the program's name"
            ) from None
        except Overran as exc:
            starved = f" (and {exc.more_s:.1f} s more it waited for a CPU)" if exc.more_s else ""
            raise ConfigError(f"{where} ran past {timeout_s:.0f} s{starved}; {fix}") from None
        if done.returncode != 0:
            raise command_error(self.config, key, done, f"exited {done.returncode}", fix)
        return done


def _one_line(reply: Mapping[str, Any]) -> str:
    """A served status reply as the one-shot form's line, read by the same checks."""
    return json.dumps(dict(reply))


def command_error(
    config: CommandConfig, key: str, done: subprocess.CompletedProcess[bytes], what: str, fix: str
) -> ConfigError:
    argv = [str(a) for a in done.args]
    said = stderr_tail(done.stderr)
    return ConfigError(
        f"{config.path}: target.{key} command `{shlex.join(argv)}` {what}{said}; {fix}"
    )
