"""The schema of a command target: ``crashpoint.toml``, or ``[tool.crashpoint]`` in
``pyproject.toml`` (the same keys under that table). Every key here is stable.

```toml
[target]
name = "billing-agent"
command = ["node", "worker.js"]      # started once per worker slot
workers = 2
lease_ttl_s = 1.0
term_grace_s = 2.0                    # optional: SIGTERM to SIGKILL; default 2 leases
poll_s = 0.5                          # optional: the longest a worker sleeps between looks
enqueue = ["node", "enqueue.js", "{job_id}", "{payload_file}"]
max_attempts = 6                      # optional: the worker's own retry cap
min_backoff_s = 0.1                   # optional: least wait after a refused write
visibility_s = 30.0                   # optional: the queue's redelivery window, if not the lease
pool = true                           # optional: each worker forks children that run the jobs
upgraded_command = ["node", "worker.js", "--v2"]   # optional: the next release's worker
cancel = ["node", "cancel.js", "{job_id}"]    # optional: cancels a job, exit 0 once recorded
status = ["node", "status.js", "{job_id}"]   # optional: one JSON line per job
[target.serve]                        # optional: enqueue and status served, once per trial
scope = "trial"                       # or "run": once per run, each request naming its trial
enqueue = ["node", "commands.js", "--serve"]   # one JSON line in, one out, per job
status = ["node", "commands.js", "--serve"]
[target.preload]                      # optional: a Python worker's heavy imports, made
modules = ["mcp", "httpx"]            # once per run; workers fork from that process
sensitive_fields = ["customer_email"]  # optional: body fields holding secrets or personal data
[target.ledger]                       # optional
dsn = "sqlite:///state/ledger.db"
[target.broker]                       # optional: a broker the harness starts per trial
kind = "redis"                        # redis-server on 127.0.0.1, durable (broker_restart runs)
env = "REDIS_URL"                     # the variable its URL goes in (or, instead of kind,
                                      # start, stop and url: config_broker.py)
[target.docker]                       # optional: --backend docker runs workers in this image
build = "."                           # a directory with a Dockerfile (or image = "ref:tag")
env = { LOG_LEVEL = "debug" }         # optional: added to the worker's CRASHPOINT_* variables
workdir = "/app"                      # optional: default, the trial's state directory
mounts = ["./fixtures:/fixtures:ro"]  # optional: "host:container[:ro|rw]", or tables
user = "1000:1000"                    # optional
[[target.steps]]                      # optional: a multi-step job, in order, each step at
name = "charge"                       # a provider of its own; multi_step_job runs then
provider = "billing"
[[target.steps]]
name = "receipt"
provider = "mailer"
[[providers]]
name = "billing"
kind = "idempotent"
[[providers]]                         # an MCP tool server: the kind's tools at URL/mcp
name = "tickets"
kind = "idempotent"
transport = "mcp"                     # optional: "http" (default) or "mcp"
tool_hints = { idempotentHint = true }  # optional, mcp only: what its write tool declares
[[providers]]                         # a persona: a real API's wire format over its kind
name = "payments"
kind = "stripe"                       # stripe, slack, sendgrid, resend, github, openai
env = "STRIPE_API_BASE"               # optional: the SDK's base URL in this variable too
[[providers]]                         # plain SMTP (unqueryable): the worker's URL is
name = "mailer"                       # smtp://127.0.0.1:PORT; X-Crashpoint-Job names the
kind = "smtp"                         # job, the Message-ID is the marker
```

Everything is checked before a worker starts: a mistake is one :class:`ConfigError` line
naming the file, the key and the fix (the CLI exits 2), because a misspelt key that is
silently ignored means its default is tested instead, and nobody notices.
"""

from __future__ import annotations

import dataclasses
import string
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contract.errors import ConfigError
from harness.targets.config_broker import BrokerDecl as BrokerDecl
from harness.targets.config_broker import BrokerSchema
from harness.targets.config_docker import DOCKER_KEYS as DOCKER_KEYS
from harness.targets.config_docker import DOCKERFILE as DOCKERFILE
from harness.targets.config_docker import MOUNT_KEYS as MOUNT_KEYS
from harness.targets.config_docker import DockerConfig as DockerConfig
from harness.targets.config_docker import DockerSchema
from harness.targets.config_docker import Mount as Mount
from harness.targets.config_faults import BACKOFF_RANGE_S as BACKOFF_RANGE_S
from harness.targets.config_faults import FieldFaultSchema
from harness.targets.config_job import JobSchema
from harness.targets.config_preload import PreloadSchema
from harness.targets.config_providers import KIND_NAMES as KIND_NAMES
from harness.targets.config_providers import ProviderDecl as ProviderDecl
from harness.targets.config_providers import ProviderSchema
from harness.targets.config_reader import EXAMPLES, shown
from harness.targets.config_serve import ServeSchema
from harness.targets.config_worker import LEASE_RANGE_S as LEASE_RANGE_S
from harness.targets.config_worker import MAX_WORKERS as MAX_WORKERS
from harness.targets.config_worker import POLL_RANGE_S as POLL_RANGE_S
from harness.targets.config_worker import TERM_GRACE_RANGE_S as TERM_GRACE_RANGE_S
from harness.targets.config_worker import WorkerSchema
from harness.targets.status_line import JOB_STATES as JOB_STATES
from harness.targets.status_line import STATUS_KEYS as STATUS_KEYS
from harness.targets.status_line import JobState as JobState
from harness.targets.status_line import JobStatus as JobStatus
from harness.targets.status_line import parse_status_line as parse_status_line

CONFIG_FILE = "crashpoint.toml"
PYPROJECT = "pyproject.toml"
TOP_KEYS = ("target", "providers")
TARGET_KEYS = (
    "name",
    "command",
    "workers",
    "lease_ttl_s",
    "enqueue",
    "max_attempts",
    "status",
    "ledger",
    "docker",
    "term_grace_s",
    "steps",
    "sensitive_fields",
    "poll_s",
    "min_backoff_s",
    "visibility_s",
    "pool",
    "upgraded_command",
    "cancel",
    "broker",
    "relay",
    "serve",
    "preload",
)
LEDGER_KEYS = ("dsn",)
#: The only names a template may use; the harness fills them per job.
PLACEHOLDERS = ("job_id", "payload_file")


@dataclass(frozen=True)
class CommandConfig:
    path: Path
    name: str
    command: tuple[str, ...]
    enqueue: tuple[str, ...]
    workers: int
    lease_ttl_s: float
    ledger_dsn: str | None
    providers: tuple[ProviderDecl, ...]
    #: The worker's declared retry cap; None: it declared none (never borrow ours).
    max_attempts: int | None = None
    #: The job-status command template; None: the harness cannot ask a job's end state.
    status: tuple[str, ...] | None = None
    #: ``[target.docker]``; None: ``--backend docker`` uses crashpoint's own image.
    docker: DockerConfig | None = None
    #: How long the worker gets after SIGTERM before SIGKILL; None: two leases.
    term_grace_s: float | None = None
    #: ``[[target.steps]]``: a multi-step job's ``(step, provider)`` in order; empty: the
    #: worker's jobs are single-step, and the multi-step rows do not run for it.
    steps: tuple[tuple[str, str], ...] = ()
    #: Job-body fields that hold secrets or personal data: the harness fills each with a
    #: recognisable stand-in, and a key or marker that carries one is a warning.
    sensitive_fields: tuple[str, ...] = ()
    #: The longest a worker sleeps between two looks at its queue, as it declares; None:
    #: it declares none, and the harness's own bounds apply (docs/fairness.md).
    poll_s: float | None = None
    #: The least time a worker leaves between a refused write and the job's next write,
    #: as it declares; None: it declares none, and the intervals seen are only reported.
    min_backoff_s: float | None = None
    #: How long the worker's queue keeps a claimed job from other workers, when that is
    #: not ``lease_ttl_s``; None: the lease is the window.
    visibility_s: float | None = None
    #: Each worker is a pool's parent whose children run the jobs (child_killed runs).
    pool: bool = False
    #: The worker's next release, which recovers what this one left (upgrade_during_recovery).
    upgraded_command: tuple[str, ...] | None = None
    #: Cancels a job (a per-job template); None: the target's jobs cannot be cancelled.
    cancel: tuple[str, ...] | None = None
    #: ``[target.broker]``: the broker started per trial; None: the target has none.
    broker: BrokerDecl | None = None
    #: The argv of the worker's outbox relay, a second process kind; None: it has none,
    #: and the relay row does not apply.
    relay: tuple[str, ...] | None = None
    #: ``[target.serve]``: the commands run as one long-lived process per trial, by op.
    serve: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    #: ``[target.serve] scope``: "trial", or "run" (one process shared by every trial).
    serve_scope: str = "trial"
    #: ``[target.preload] modules``: imported once per run by the process workers fork
    #: from (:mod:`harness.backends.zygote`); empty: every worker starts cold.
    preload: tuple[str, ...] = ()

    @property
    def has_status(self) -> bool:
        """Whether a job's state can be asked, one-shot or served."""
        return self.status is not None or "status" in self.serve

    @property
    def base_dir(self) -> Path:
        return self.path.parent


def find_declared(directory: Path) -> Path | None:
    """The configuration in ``directory``, or None: ``crashpoint.toml`` first, then a
    ``pyproject.toml`` that has a ``[tool.crashpoint]`` table."""
    own = directory / CONFIG_FILE
    if own.is_file():
        return own
    pyproject = directory / PYPROJECT
    if pyproject.is_file():
        tool = _read_toml(pyproject).get("tool")
        if isinstance(tool, dict) and "crashpoint" in tool:
            return pyproject
    return None


def find_config(directory: Path) -> Path:
    """The configuration in ``directory`` (see :func:`find_declared`), or a ConfigError
    saying how to make one."""
    found = find_declared(directory)
    if found is not None:
        return found
    raise ConfigError(
        f"{directory}: no {CONFIG_FILE} and no [tool.crashpoint] table in {PYPROJECT}; "
        "run `crashpoint init` here or pass -c with the file"
    )


def load_config(path: Path) -> CommandConfig:
    """Read and check a command target's configuration (a file, or a directory holding
    one); every problem is one :class:`ConfigError` line naming file, key and fix."""
    if path.is_dir():
        path = find_config(path)
    data = _read_toml(path)
    prefix = ""
    if path.name == PYPROJECT:
        tool = data.get("tool")
        if not isinstance(tool, dict) or "crashpoint" not in tool:
            raise ConfigError(
                f"{path}: no [tool.crashpoint] table; add one with the keys of "
                f"{CONFIG_FILE}, or pass -c with a {CONFIG_FILE}"
            )
        data, prefix = tool["crashpoint"], "tool.crashpoint."
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: tool.crashpoint must be a table; write [tool.crashpoint]")
    return config_from_data(data, path=path, prefix=prefix)


def config_from_data(data: Mapping[str, Any], *, path: Path, prefix: str = "") -> CommandConfig:
    """Check a parsed document (``tomllib``'s output) read from ``path``, whose keys live
    under ``prefix``; relative paths in it start at ``path``'s directory."""
    return _Schema(path, prefix).config(data)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file; pass -c with the path to {CONFIG_FILE}") from None
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot be read ({exc.strerror or exc}); check the path and its permissions"
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(f"{path}: not valid TOML ({detail}); fix the syntax there") from None


class _Schema(
    WorkerSchema,
    JobSchema,
    DockerSchema,
    ProviderSchema,
    FieldFaultSchema,
    BrokerSchema,
    ServeSchema,
    PreloadSchema,
):
    """Checks one whole document: ``[target]`` here, its parts in the mixins."""

    def config(self, data: Mapping[str, Any]) -> CommandConfig:
        self.known(data, "", TOP_KEYS, label="the top level")
        target = data.get("target")
        if target is None:
            raise self.fail("target", "is missing", "add a [target] table with name and command")
        if not isinstance(target, dict):
            raise self.fail("target", f"must be a table, got {shown(target)}", "write [target]")
        self.known(target, "target.", TARGET_KEYS, label="[target]")
        name = self.string(target, "target.", "name")
        workers = self.worker_count(target)
        lease, term_grace, poll = self.timings(target)
        max_attempts = self.attempt_cap(target)
        command = self.argv(target, "command")
        for arg in command:
            for field in PLACEHOLDERS:
                if f"{{{field}}}" in arg:
                    raise self.fail(
                        "target.command",
                        f"uses {{{field}}}, but it is started once per worker, not per job",
                        "pass jobs through enqueue instead",
                    )
        serve = self.serve(target.get("serve"))
        # A served enqueue stands in for the one-shot one, which may then be left out.
        served_only = "enqueue" in serve and "enqueue" not in target
        enqueue = () if served_only else self.template(target, "enqueue")
        status = self.template(target, "status") if "status" in target else None
        providers = self.providers(data.get("providers"))
        return CommandConfig(
            path=self.path.resolve(),
            name=name,
            command=command,
            enqueue=enqueue,
            workers=workers,
            lease_ttl_s=1.0 if lease is None else lease,
            ledger_dsn=self.ledger(target.get("ledger")),
            providers=providers,
            max_attempts=max_attempts,
            status=status,
            docker=self.docker(target.get("docker")),
            term_grace_s=term_grace,
            steps=self.steps(target.get("steps"), providers),
            sensitive_fields=self.sensitive_fields(target),
            poll_s=poll,
            relay=self.argv(target, "relay") if "relay" in target else None,
            serve=serve,
            serve_scope=self.serve_scope(target.get("serve")),
            preload=self.preload(target.get("preload")),
            **self.field_faults(target),
            broker=self.broker(target.get("broker")),
        )

    def argv(self, target: Mapping[str, Any], key: str) -> tuple[str, ...]:
        value = target.get(key)
        if value is None:
            raise self.fail(f"target.{key}", "is missing", f"add {key} = {EXAMPLES[key]}")
        if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
            raise self.wrong("target.", key, value, "a list of strings (an argv)")
        if not value or not value[0]:
            raise self.fail(
                f"target.{key}", "is empty", f"name the program first: {key} = {EXAMPLES[key]}"
            )
        return tuple(value)

    def template(self, target: Mapping[str, Any], key: str) -> tuple[str, ...]:
        """An argv filled per job: only :data:`PLACEHOLDERS`, and at least one of them."""
        argv = self.argv(target, key)
        known = " or ".join(f"{{{p}}}" for p in PLACEHOLDERS)
        used = set()
        for arg in argv:
            try:
                fields = [(f, conv, spec) for _, f, spec, conv in string.Formatter().parse(arg)]
            except ValueError:
                raise self.fail(
                    f"target.{key}",
                    f"has an unmatched brace in {shown(arg)}",
                    "write {{ or }} for a literal brace",
                ) from None
            for field, conv, spec in fields:
                if field is None:
                    continue
                if field not in PLACEHOLDERS or conv or spec:
                    raise self.fail(
                        f"target.{key}",
                        f"has unknown placeholder {{{field}{'!' + conv if conv else ''}"
                        f"{':' + spec if spec else ''}}} in {shown(arg)}",
                        f"use {known} (write {{{{ for a literal brace)",
                    )
                used.add(field)
        if not used:
            raise self.fail(
                f"target.{key}",
                "never says which job",
                f"pass {known}, for example {key} = {EXAMPLES[key]}",
            )
        return argv

    def ledger(self, ledger: object) -> str | None:
        if ledger is None:
            return None
        if not isinstance(ledger, dict):
            raise self.fail(
                "target.ledger", f"must be a table, got {shown(ledger)}", "write [target.ledger]"
            )
        self.known(ledger, "target.ledger.", LEDGER_KEYS, label="[target.ledger]")
        return self.string(ledger, "target.ledger.", "dsn")
