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
status = ["node", "status.js", "{job_id}"]   # optional: one JSON line per job
sensitive_fields = ["customer_email"]  # optional: body fields holding secrets or personal data
[target.ledger]                       # optional
dsn = "sqlite:///state/ledger.db"
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

import difflib
import json
import re
import string
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast, get_args

from fake_providers.tools import HINTS as TOOL_HINTS
from fake_providers.tools import TRANSPORTS
from harness.contract.env import provider_env_name, provider_env_var
from harness.contract.errors import ConfigError
from harness.contract.vocabulary import PERSONA_KINDS, PROVIDER_KINDS
from harness.targets.personas import sdk_base_url

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
)
LEDGER_KEYS = ("dsn",)
STEP_KEYS = ("name", "provider")
#: A step's name goes into point names (``before_external_call@charge``) and cell ids.
_STEP_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
DOCKER_KEYS = ("image", "build", "env", "workdir", "mounts", "user")
MOUNT_KEYS = ("source", "target", "read_only")
DOCKERFILE = "Dockerfile"
PROVIDER_KEYS = ("name", "kind", "transport", "tool_hints", "env")
#: What ``kind`` may name: a kind, or a persona over one.
KIND_NAMES = (*PROVIDER_KINDS, *PERSONA_KINDS)
#: The only names a template may use; the harness fills them per job.
PLACEHOLDERS = ("job_id", "payload_file")
MAX_WORKERS = 64
LEASE_RANGE_S = (0.05, 600.0)
TERM_GRACE_RANGE_S = (0.05, 600.0)
#: The trial's bound (``TrialConfig.quiescence_timeout_s``, 20 s) leaves room for a
#: couple of polls: a worker that looks for work less often cannot end a trial within it.
POLL_RANGE_S = (0.001, 10.0)

JobState = Literal["done", "needs_review", "dead_lettered", "pending"]
JOB_STATES: tuple[str, ...] = get_args(JobState)
STATUS_KEYS = ("state", "external_ref", "attempts", "last_error", "idempotency_key")

#: How the fix for a wrong or missing value reads: ``write KEY = EXAMPLE``.
_EXAMPLES = {
    "name": '"billing-agent"',
    "command": '["node", "worker.js"]',
    "workers": "2",
    "lease_ttl_s": "1.0",
    "term_grace_s": "2.0",
    "poll_s": "0.5",
    "enqueue": '["node", "enqueue.js", "{job_id}", "{payload_file}"]',
    "max_attempts": "3",
    "status": '["node", "status.js", "{job_id}"]',
    "dsn": '"sqlite:///state/ledger.db"',
    "kind": '"idempotent"',
    "image": '"billing-worker:1"',
    "build": '"."',
    "workdir": '"/app"',
    "user": '"1000:1000"',
    "env": '{ LOG_LEVEL = "debug" }',
    "mounts": '["./fixtures:/fixtures:ro"]',
    "sensitive_fields": '["customer_email", "api_token"]',
}
#: A job-body field name the harness may fill (``sensitive_fields``).
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
#: Body fields the harness owns: the oracle ties arrivals to jobs through ``job_id``.
_RESERVED_FIELDS = ("job_id", "client_marker")
#: A local image: ``name[:tag][@digest]`` as Docker spells it, or an image id.
_IMAGE_REF = re.compile(
    r"^(?:sha256:[0-9a-f]{64}|[0-9a-f]{12,64}|"
    r"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?)$"
)
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(?::[A-Za-z0-9_][A-Za-z0-9_.-]*)?$")


@dataclass(frozen=True)
class ProviderDecl:
    name: str
    #: The provider's kind (idempotent, plain, unqueryable): what every decision by kind
    #: (the oracle's, the scenarios', fault arming) sees, a persona's included.
    kind: str
    transport: str = "http"
    #: The write tool's annotations where they differ from the kind's honest ones (mcp).
    tool_hints: tuple[tuple[str, bool], ...] = ()
    #: The real API the provider speaks over its kind (``kind = "stripe"`` in the file);
    #: None: the kind's own API.
    persona: str | None = None
    #: A further variable the worker gets the SDK's base URL in (``STRIPE_API_BASE``).
    env: str | None = None

    @property
    def wire(self) -> str:
        """What ``kind`` says in the file: the persona, else the kind."""
        return self.persona or self.kind

    def start_options(self) -> dict[str, Any]:
        """What ``start_provider`` needs besides kind and name to start this one."""
        options: dict[str, Any] = {"persona": self.persona} if self.persona else {}
        if self.transport != "http":
            options |= {"transport": self.transport, "tool_hints": dict(self.tool_hints) or None}
        return options

    def env_alias(self, url: str) -> dict[str, str]:
        """``{env: the SDK's base URL}`` for a provider at ``url``; empty without ``env``."""
        return {self.env: sdk_base_url(self.persona, url)} if self.env else {}


@dataclass(frozen=True)
class Mount:
    """A host path bound into the worker's container (``source`` is absolute)."""

    source: Path
    target: str
    read_only: bool = False


@dataclass(frozen=True)
class DockerConfig:
    """``[target.docker]``: the image the workers run in under ``--backend docker``.

    Exactly one of ``image`` (a local image) and ``build`` (an absolute directory holding
    a Dockerfile) is set.
    """

    image: str | None = None
    build: Path | None = None
    env: tuple[tuple[str, str], ...] = ()
    workdir: str | None = None
    mounts: tuple[Mount, ...] = ()
    user: str | None = None


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

    @property
    def base_dir(self) -> Path:
        return self.path.parent


@dataclass(frozen=True)
class JobStatus:
    """One job's state as the worker's ``status`` command reports it."""

    state: JobState
    external_ref: str | None = None
    attempts: int | None = None
    last_error: str | None = None
    #: The key the worker recorded for the job (shown to a reviewer beside the
    #: provider's arrivals); None: it prints none.
    idempotency_key: str | None = None

    @property
    def final(self) -> bool:
        return self.state != "pending"


def parse_status_line(text: str) -> JobStatus:
    """The status command's output as a :class:`JobStatus`; :class:`ValueError` saying
    what is wrong with it otherwise (the caller knows which command printed it)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) != 1:
        raise ValueError(
            f"printed {len(lines)} lines, not one JSON line (logs belong on stderr)"
            if lines
            else "printed nothing, not one JSON line"
        )
    try:
        doc = json.loads(lines[0])
    except ValueError:
        raise ValueError(f"printed {_shown(_clip(lines[0]))}, which is not JSON") from None
    if not isinstance(doc, dict):
        raise ValueError(f"printed {_shown(_clip(lines[0]))}, not a JSON object")
    unknown = sorted(set(doc) - set(STATUS_KEYS))
    if unknown:
        raise ValueError(
            f"printed unknown key {_shown(unknown[0])}; the keys are {', '.join(STATUS_KEYS)}"
        )
    state = doc.get("state")
    if state not in JOB_STATES:
        raise ValueError(
            f"printed state {_shown(state)}; it must be one of {', '.join(JOB_STATES)}"
        )
    attempts = doc.get("attempts")
    if attempts is not None and (not _is_int(attempts) or attempts < 0):
        raise ValueError(f"printed attempts {_shown(attempts)}; it must be a whole number >= 0")
    for key in ("external_ref", "last_error", "idempotency_key"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            raise ValueError(f"printed {key} {_shown(doc[key])}; it must be a string")
    return JobStatus(
        state=cast(JobState, state),
        external_ref=doc.get("external_ref"),
        attempts=attempts,
        last_error=doc.get("last_error"),
        idempotency_key=doc.get("idempotency_key"),
    )


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


class _Schema:
    """Checks one document; ``prefix`` is where its tables live (``tool.crashpoint.``)."""

    def __init__(self, path: Path, prefix: str) -> None:
        self.path = path
        self.prefix = prefix

    @property
    def base_dir(self) -> Path:
        """Where relative paths in the file start: the file's own directory."""
        return self.path.resolve().parent

    def fail(self, key: str, problem: str, fix: str) -> ConfigError:
        return ConfigError(f"{self.path}: {self.prefix}{key} {problem}; {fix}")

    def config(self, data: Mapping[str, Any]) -> CommandConfig:
        self.known(data, "", TOP_KEYS, label="the top level")
        target = data.get("target")
        if target is None:
            raise self.fail("target", "is missing", "add a [target] table with name and command")
        if not isinstance(target, dict):
            raise self.fail("target", f"must be a table, got {_shown(target)}", "write [target]")
        self.known(target, "target.", TARGET_KEYS, label="[target]")
        name = self.string(target, "target.", "name")
        workers = self.integer(target, "target.", "workers", default=1)
        if not 1 <= workers <= MAX_WORKERS:
            raise self.fail(
                "target.workers",
                f"must be from 1 to {MAX_WORKERS}, got {workers}",
                "write workers = 2",
            )
        lease = self.seconds(
            target,
            "lease_ttl_s",
            LEASE_RANGE_S,
            "write the lease your worker uses, for example lease_ttl_s = 1.0",
        )
        term_grace = self.seconds(
            target,
            "term_grace_s",
            TERM_GRACE_RANGE_S,
            "write how long your worker needs to stop on SIGTERM, for example "
            "term_grace_s = 2.0, or leave it out for two leases",
        )
        poll = self.seconds(
            target,
            "poll_s",
            POLL_RANGE_S,
            "write the longest your worker sleeps between looks at its queue, for "
            "example poll_s = 0.5, or leave it out",
        )
        max_attempts = None
        if "max_attempts" in target:
            max_attempts = self.integer(target, "target.", "max_attempts", default=0)
            if max_attempts < 1:
                raise self.fail(
                    "target.max_attempts",
                    f"must be at least 1, got {max_attempts}",
                    "write the worker's cap on writes per job, or leave the key out "
                    "when it has none",
                )
        command = self.argv(target, "command")
        for arg in command:
            for field in PLACEHOLDERS:
                if f"{{{field}}}" in arg:
                    raise self.fail(
                        "target.command",
                        f"uses {{{field}}}, but it is started once per worker, not per job",
                        "pass jobs through enqueue instead",
                    )
        enqueue = self.template(target, "enqueue")
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
        )

    def steps(
        self, steps: object, providers: tuple[ProviderDecl, ...]
    ) -> tuple[tuple[str, str], ...]:
        if steps is None:
            return ()
        fix = 'write each as [[target.steps]] with name = "charge" and provider = "billing"'
        if not isinstance(steps, list) or len(steps) < 2:
            raise self.fail(
                "target.steps", f"must list two steps or more, got {_shown(steps)}", fix
            )
        declared = [p.name for p in providers]
        out: list[tuple[str, str]] = []
        for i, entry in enumerate(steps):
            where = f"target.steps[{i}]."
            if not isinstance(entry, dict):
                raise self.fail(where[:-1], f"must be a table, got {_shown(entry)}", fix)
            self.known(entry, where, STEP_KEYS, label="[[target.steps]]")
            name = self.string(entry, where, "name", example='"charge"')
            provider = self.string(entry, where, "provider", example='"billing"')
            if not _STEP_NAME.match(name) or name in (n for n, _ in out):
                raise self.fail(
                    f"{where}name",
                    f"{_shown(name)} is not a new name of letters, digits, - and _",
                    "give each step its own name, like charge",
                )
            if provider not in declared:
                raise self.fail(
                    f"{where}provider",
                    f"{_shown(provider)} is not a declared provider",
                    f"name one of {', '.join(declared)}",
                )
            if provider in (p for _, p in out):
                # The oracle tells steps apart by their provider (one effect per job at each).
                raise self.fail(
                    f"{where}provider",
                    f"{_shown(provider)} already has a step",
                    "give each step a provider of its own",
                )
            out.append((name, provider))
        return tuple(out)

    def sensitive_fields(self, target: Mapping[str, Any]) -> tuple[str, ...]:
        """``[target] sensitive_fields``: names of job-body fields, each once."""
        value = target.get("sensitive_fields", [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.wrong("target.", "sensitive_fields", value, "a list of field names")
        for name in value:
            if not _FIELD_NAME.match(name):
                raise self.fail(
                    "target.sensitive_fields",
                    f"{_shown(name)} is not a field name (letters, digits, _ and -)",
                    f"write sensitive_fields = {_EXAMPLES['sensitive_fields']}",
                )
            if name in _RESERVED_FIELDS:
                raise self.fail(
                    "target.sensitive_fields",
                    f"{_shown(name)} is a field the harness owns and the oracle reads",
                    "leave it out; list the fields that carry secrets or personal data",
                )
        if len(set(value)) != len(value):
            raise self.fail(
                "target.sensitive_fields",
                "names a field twice",
                "list each field once",
            )
        return tuple(value)

    def known(
        self, table: Mapping[str, Any], where: str, keys: tuple[str, ...], *, label: str
    ) -> None:
        for key in table:
            if key not in keys:
                near = difflib.get_close_matches(str(key), keys, n=1, cutoff=0.6)
                raise self.fail(
                    f"{where}{_key_name(key)}",
                    "is not a known key" + (f" (did you mean {_shown(near[0])}?)" if near else ""),
                    f"{label} allows {', '.join(keys)}",
                )

    def string(
        self, table: Mapping[str, Any], where: str, key: str, *, example: str | None = None
    ) -> str:
        example = example or _EXAMPLES[key]
        value = table.get(key)
        if value is None:
            raise self.fail(f"{where}{key}", "is missing", f"add {key} = {example}")
        if not isinstance(value, str) or not value:
            raise self.wrong(where, key, value, "a non-empty string", example=example)
        return value

    def integer(self, table: Mapping[str, Any], where: str, key: str, *, default: int) -> int:
        value = table.get(key, default)
        if not _is_int(value):
            raise self.wrong(where, key, value, "a whole number")
        return int(value)

    def seconds(
        self,
        target: Mapping[str, Any],
        key: str,
        bounds: tuple[float, float],
        fix: str,
    ) -> float | None:
        """``[target] key``, a number of seconds within ``bounds``; None when the target
        declares none."""
        if key not in target:
            return None
        value = self.number(target, "target.", key, default=0.0)
        low, high = bounds
        if not low <= value <= high:
            raise self.fail(
                f"target.{key}",
                f"must be seconds from {low} to {high:.0f}, got {_shown(target[key])}",
                fix,
            )
        return value

    def number(self, table: Mapping[str, Any], where: str, key: str, *, default: float) -> float:
        value = table.get(key, default)
        if not (_is_int(value) or isinstance(value, float)):
            raise self.wrong(where, key, value, "a number")
        return float(value)

    def wrong(
        self, where: str, key: str, value: object, what: str, *, example: str | None = None
    ) -> ConfigError:
        return self.fail(
            f"{where}{key}",
            f"must be {what}, got {_shown(value)} ({_toml_type(value)})",
            f"write {key} = {example or _EXAMPLES[key]}",
        )

    def argv(self, target: Mapping[str, Any], key: str) -> tuple[str, ...]:
        value = target.get(key)
        if value is None:
            raise self.fail(f"target.{key}", "is missing", f"add {key} = {_EXAMPLES[key]}")
        if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
            raise self.wrong("target.", key, value, "a list of strings (an argv)")
        if not value or not value[0]:
            raise self.fail(
                f"target.{key}", "is empty", f"name the program first: {key} = {_EXAMPLES[key]}"
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
                    f"has an unmatched brace in {_shown(arg)}",
                    "write {{ or }} for a literal brace",
                ) from None
            for field, conv, spec in fields:
                if field is None:
                    continue
                if field not in PLACEHOLDERS or conv or spec:
                    raise self.fail(
                        f"target.{key}",
                        f"has unknown placeholder {{{field}{'!' + conv if conv else ''}"
                        f"{':' + spec if spec else ''}}} in {_shown(arg)}",
                        f"use {known} (write {{{{ for a literal brace)",
                    )
                used.add(field)
        if not used:
            raise self.fail(
                f"target.{key}",
                "never says which job",
                f"pass {known}, for example {key} = {_EXAMPLES[key]}",
            )
        return argv

    def ledger(self, ledger: object) -> str | None:
        if ledger is None:
            return None
        if not isinstance(ledger, dict):
            raise self.fail(
                "target.ledger", f"must be a table, got {_shown(ledger)}", "write [target.ledger]"
            )
        self.known(ledger, "target.ledger.", LEDGER_KEYS, label="[target.ledger]")
        return self.string(ledger, "target.ledger.", "dsn")

    def docker(self, docker: object) -> DockerConfig | None:
        if docker is None:
            return None
        where = "target.docker."
        if not isinstance(docker, dict):
            raise self.fail(
                "target.docker", f"must be a table, got {_shown(docker)}", "write [target.docker]"
            )
        self.known(docker, where, DOCKER_KEYS, label="[target.docker]")
        if "image" in docker and "build" in docker:
            raise self.fail(
                "target.docker",
                "sets both image and build",
                "keep image for a local image, or build for a directory with a Dockerfile",
            )
        image = self.optional(
            docker,
            where,
            "image",
            _IMAGE_REF.fullmatch,
            "is not an image reference",
            f"name a local image like {_EXAMPLES['image']} (lower-case name, then :tag)",
        )
        build = self.build_dir(docker) if image is None and "build" in docker else None
        if image is None and build is None:
            raise self.fail(
                "target.docker",
                "names no image",
                f"add image = {_EXAMPLES['image']} or build = {_EXAMPLES['build']}",
            )
        workdir = self.optional(
            docker,
            where,
            "workdir",
            lambda v: v.startswith("/"),
            "is not an absolute path in the container",
            f"write workdir = {_EXAMPLES['workdir']}",
        )
        user = self.optional(
            docker,
            where,
            "user",
            _USER.fullmatch,
            "is not a user",
            f"write a name, uid or uid:gid, like user = {_EXAMPLES['user']}",
        )
        return DockerConfig(
            image=image,
            build=build,
            env=self.docker_env(docker.get("env", {})),
            workdir=workdir,
            mounts=self.mounts(docker.get("mounts", [])),
            user=user,
        )

    def optional(
        self,
        table: Mapping[str, Any],
        where: str,
        key: str,
        valid: Callable[[str], object],
        problem: str,
        fix: str,
    ) -> str | None:
        """An optional string key, checked by ``valid``; None when absent."""
        if key not in table:
            return None
        value = self.string(table, where, key)
        if not valid(value):
            raise self.fail(f"{where}{key}", f"{_shown(value)} {problem}", fix)
        return value

    def build_dir(self, docker: Mapping[str, Any]) -> Path:
        raw = self.string(docker, "target.docker.", "build")
        build = self.base_dir / raw
        if not build.is_dir():
            raise self.fail(
                "target.docker.build",
                f"{_shown(raw)} is not a directory ({build})",
                "name the directory holding the Dockerfile, relative to this file",
            )
        if not (build / DOCKERFILE).is_file():
            raise self.fail(
                "target.docker.build",
                f"{_shown(raw)} has no {DOCKERFILE} ({build / DOCKERFILE})",
                f"add a {DOCKERFILE} there, or name the directory that has one",
            )
        return build.resolve()

    def docker_env(self, env: object) -> tuple[tuple[str, str], ...]:
        key = "target.docker.env"
        if not isinstance(env, dict):
            raise self.wrong("target.docker.", "env", env, "a table of strings")
        out = []
        for name, value in env.items():
            if not _ENV_NAME.fullmatch(name):
                raise self.fail(
                    key,
                    f"names {_shown(name)}, which is not an environment variable",
                    "use letters, digits and _ (not first a digit), like LOG_LEVEL",
                )
            if name.startswith("CRASHPOINT_"):
                raise self.fail(
                    f"{key}.{name}",
                    "is set by the harness itself",
                    "leave CRASHPOINT_* out; the worker gets them from each trial",
                )
            if not isinstance(value, str):
                raise self.fail(
                    f"{key}.{name}",
                    f"must be a string, got {_shown(value)} ({_toml_type(value)})",
                    f'quote it: {name} = "{value}"',
                )
            out.append((name, value))
        return tuple(out)

    def mounts(self, mounts: object) -> tuple[Mount, ...]:
        if not isinstance(mounts, list):
            raise self.wrong("target.docker.", "mounts", mounts, "an array")
        out: list[Mount] = []
        for i, entry in enumerate(mounts):
            where = f"target.docker.mounts[{i}]"
            if isinstance(entry, str):
                mount = self.mount_string(where, entry)
            elif isinstance(entry, dict):
                mount = self.mount_table(where, entry)
            else:
                raise self.fail(
                    where,
                    f"must be a string or a table, got {_shown(entry)}",
                    'write "host:container[:ro]" or { source = "...", target = "..." }',
                )
            if any(m.target == mount.target for m in out):
                raise self.fail(
                    where,
                    f"mounts {_shown(mount.target)} a second time",
                    "give each mount its own container path",
                )
            out.append(mount)
        return tuple(out)

    def mount_string(self, where: str, entry: str) -> Mount:
        parts = entry.split(":")
        if len(parts) not in (2, 3) or not all(parts[:2]):
            raise self.fail(
                where,
                f"{_shown(entry)} is not host:container[:ro]",
                'write it like "./fixtures:/fixtures:ro", or as a table',
            )
        mode = parts[2] if len(parts) == 3 else "rw"
        if mode not in ("ro", "rw"):
            raise self.fail(
                where, f"{_shown(entry)} has mode {_shown(mode)}", "end it with :ro or :rw"
            )
        return self.mount(where, parts[0], parts[1], read_only=mode == "ro")

    def mount_table(self, where: str, entry: Mapping[str, Any]) -> Mount:
        self.known(entry, f"{where}.", MOUNT_KEYS, label="a mount")
        source = self.string(entry, f"{where}.", "source", example='"./fixtures"')
        target = self.string(entry, f"{where}.", "target", example='"/fixtures"')
        read_only = entry.get("read_only", False)
        if not isinstance(read_only, bool):
            raise self.wrong(f"{where}.", "read_only", read_only, "true or false", example="true")
        return self.mount(where, source, target, read_only=read_only)

    def mount(self, where: str, source: str, target: str, *, read_only: bool) -> Mount:
        host = (self.base_dir / source).resolve()
        if not host.exists():
            raise self.fail(
                where,
                f"host path {_shown(source)} does not exist ({host})",
                "create it, or fix the path (relative paths start at this file)",
            )
        if not target.startswith("/"):
            raise self.fail(
                where,
                f"container path {_shown(target)} is not absolute",
                "write it from the container's root, like /fixtures",
            )
        return Mount(source=host, target=target, read_only=read_only)

    def providers(self, providers: object) -> tuple[ProviderDecl, ...]:
        if providers is None or providers == []:
            raise self.fail(
                "providers",
                "declares no provider",
                'add a [[providers]] table with name = "billing" and kind = "idempotent"',
            )
        if not isinstance(providers, list):
            raise self.fail(
                "providers",
                f"must be an array of tables, got {_shown(providers)}",
                "write each one as a [[providers]] table",
            )
        decls: list[ProviderDecl] = []
        by_var: dict[str, str] = {}
        for i, entry in enumerate(providers):
            where = f"providers[{i}]."
            if not isinstance(entry, dict):
                raise self.fail(
                    where[:-1], f"must be a table, got {_shown(entry)}", "write it as [[providers]]"
                )
            self.known(entry, where, PROVIDER_KEYS, label="[[providers]]")
            name = self.string(entry, where, "name", example='"billing"')
            kind = self.string(entry, where, "kind")
            if kind not in KIND_NAMES:
                near = difflib.get_close_matches(kind.lower(), KIND_NAMES, n=1, cutoff=0.6)
                raise self.fail(
                    f"{where}kind",
                    f"is {_shown(kind)}" + (f" (did you mean {_shown(near[0])}?)" if near else ""),
                    f"use one of {', '.join(KIND_NAMES)}",
                )
            if not provider_env_name(name):
                raise self.fail(
                    f"{where}name",
                    f"{_shown(name)} has no letter or digit",
                    "the worker reads CRASHPOINT_PROVIDER_<NAME>_URL; name it like billing",
                )
            var = provider_env_var(name)
            if name in (d.name for d in decls):
                raise self.fail(
                    f"{where}name",
                    f"{_shown(name)} is declared twice",
                    "give each provider its own name",
                )
            if var in by_var:
                raise self.fail(
                    f"{where}name",
                    f"{_shown(name)} and {_shown(by_var[var])} both give the worker {var}",
                    "rename one so the worker can tell them apart",
                )
            by_var[var] = name
            transport = entry.get("transport", "http")
            if transport not in TRANSPORTS:
                raise self.fail(
                    f"{where}transport",
                    f"is {_shown(transport)}",
                    f"use one of {', '.join(_shown(t) for t in TRANSPORTS)} (default http)",
                )
            persona = kind if kind in PERSONA_KINDS else None
            if persona is not None and transport != "http":
                raise self.fail(
                    f"{where}transport",
                    f"is {_shown(transport)} on the {persona} persona, which speaks HTTP only",
                    f'drop transport, or use kind = "{PERSONA_KINDS[persona]}" for an MCP tool',
                )
            alias = self.url_env(entry, where, decls)
            decls.append(
                ProviderDecl(
                    name,
                    PERSONA_KINDS.get(kind, kind),
                    transport,
                    self.tool_hints(entry, where, transport),
                    persona=persona,
                    env=alias,
                )
            )
        return tuple(decls)

    def url_env(
        self, entry: Mapping[str, Any], where: str, decls: list[ProviderDecl]
    ) -> str | None:
        """``env``: a variable of the worker's own that gets the SDK's base URL too."""
        if "env" not in entry:
            return None
        alias = self.string(entry, where, "env", example='"STRIPE_API_BASE"')
        if not _ENV_NAME.fullmatch(alias):
            raise self.fail(
                f"{where}env",
                f"{_shown(alias)} is not an environment variable name",
                'use letters, digits and _ (not first a digit), like env = "STRIPE_API_BASE"',
            )
        if alias.startswith("CRASHPOINT_"):
            raise self.fail(
                f"{where}env",
                f"{_shown(alias)} is a name the harness sets itself",
                "name the variable your SDK or worker reads, like STRIPE_API_BASE",
            )
        if any(d.env == alias for d in decls):
            raise self.fail(
                f"{where}env",
                f"{_shown(alias)} is given to two providers",
                "give each provider's URL its own variable",
            )
        return alias

    def tool_hints(
        self, entry: Mapping[str, Any], where: str, transport: str
    ) -> tuple[tuple[str, bool], ...]:
        if "tool_hints" not in entry:
            return ()
        hints = entry["tool_hints"]
        key = f"{where}tool_hints"
        if transport != "mcp":
            raise self.fail(
                key,
                'is set on a provider without transport = "mcp"',
                'only tools declare hints: add transport = "mcp", or drop tool_hints',
            )
        if not isinstance(hints, dict):
            raise self.wrong(
                where, "tool_hints", hints, "a table", example="{ idempotentHint = true }"
            )
        out = []
        for name, value in hints.items():
            if name not in TOOL_HINTS:
                raise self.fail(
                    f"{key}.{name}", "is not an MCP tool annotation", f"use {', '.join(TOOL_HINTS)}"
                )
            if not isinstance(value, bool):
                raise self.fail(
                    f"{key}.{name}",
                    f"must be true or false, got {_shown(value)} ({_toml_type(value)})",
                    f"write {name} = true",
                )
            out.append((name, value))
        return tuple(out)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _toml_type(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def _shown(value: object) -> str:
    """A value as the file (TOML) or the line (JSON) spells it: ``"two"``, ``true``."""
    return json.dumps(value, ensure_ascii=False, default=str)


def _key_name(key: str) -> str:
    """A key as TOML spells it: bare when it can be, else quoted (a key may hold a
    newline, and the error about it is still one line)."""
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
