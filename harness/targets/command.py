"""Any worker, in any language, described by ``crashpoint.toml`` (stable keys).

```toml
[target]
name = "billing-agent"
command = ["node", "worker.js"]      # started once per worker slot
workers = 2
lease_ttl_s = 1.0
enqueue = ["node", "enqueue.js", "{job_id}", "{payload_file}"]
[target.ledger]                       # optional
dsn = "sqlite:///state/ledger.db"
[[providers]]
name = "billing"
kind = "idempotent"
```

Arguments naming a file beside ``crashpoint.toml`` are made absolute, because the worker
runs in the trial's fresh state directory. Without a ledger the oracle judges from
provider truth alone, and a trial is quiescent once every job has an effect and the
provider has been quiet for longer than a lease (a crashed worker's job is taken over
only once its lease has run out, so a shorter silence is not the end).
"""

from __future__ import annotations

import json
import subprocess
import time
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contract.errors import ConfigError, InfrastructureError
from harness.contract.vocabulary import PROVIDER_KINDS
from harness.history import Event
from harness.oracle import JobFinal

TARGET_KEYS = ("name", "command", "workers", "lease_ttl_s", "enqueue", "ledger")
ENQUEUE_TIMEOUT_S = 10.0
#: No arrival for this long (with every job served) counts as quiet ...
QUIET_S = 0.3
#: ... and for this many leases: a recovering worker acts only after a lease expires.
QUIET_LEASES = 1.5


@dataclass(frozen=True)
class ProviderDecl:
    name: str
    kind: str


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

    @property
    def base_dir(self) -> Path:
        return self.path.parent


def load_config(path: Path) -> CommandConfig:
    """Read and check ``crashpoint.toml``; every problem is one line naming file and key."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: no such file; pass -c with the path to crashpoint.toml"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    target = data.get("target")
    if not isinstance(target, dict):
        raise ConfigError(f"{path}: [target] table is missing")

    def known(table: Mapping[str, Any], where: str, keys: tuple[str, ...]) -> None:
        # A misspelt key would otherwise be ignored silently and its default used.
        for key in table:
            if key not in keys:
                raise ConfigError(
                    f"{path}: {where}.{key} is not a known key; use {', '.join(keys)}"
                )

    def need(table: Mapping[str, Any], key: str, where: str, kind: type) -> Any:
        value = table.get(key)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise ConfigError(f"{path}: {where}.{key} must be a {kind.__name__}, got {value!r}")
        return value

    def argv(key: str) -> tuple[str, ...]:
        value = target.get(key)
        if not (isinstance(value, list) and value and all(isinstance(a, str) for a in value)):
            raise ConfigError(f"{path}: target.{key} must be a non-empty list of strings")
        return tuple(value)

    known(target, "target", TARGET_KEYS)
    name = need(target, "name", "target", str)
    workers = target.get("workers", 1)
    if not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= 64:
        raise ConfigError(
            f"{path}: target.workers must be an integer from 1 to 64, got {workers!r}"
        )
    lease = target.get("lease_ttl_s", 1.0)
    if not isinstance(lease, int | float) or isinstance(lease, bool) or not 0.05 <= lease <= 600:
        raise ConfigError(f"{path}: target.lease_ttl_s must be seconds from 0.05 to 600")
    enqueue = argv("enqueue")
    if not any("{job_id}" in a or "{payload_file}" in a for a in enqueue):
        raise ConfigError(f"{path}: target.enqueue must use {{job_id}} or {{payload_file}}")
    ledger = target.get("ledger")
    dsn = None
    if ledger is not None:
        if not isinstance(ledger, dict):
            raise ConfigError(f"{path}: [target.ledger] must be a table")
        known(ledger, "target.ledger", ("dsn",))
        dsn = need(ledger, "dsn", "target.ledger", str)
    providers = data.get("providers")
    if not isinstance(providers, list) or not providers:
        raise ConfigError(f"{path}: at least one [[providers]] entry is needed")
    decls = []
    for i, p in enumerate(providers):
        where = f"providers[{i}]"
        if not isinstance(p, dict):
            raise ConfigError(f"{path}: {where} must be a table")
        known(p, where, ("name", "kind"))
        pname = need(p, "name", where, str)
        kind = need(p, "kind", where, str)
        if kind not in PROVIDER_KINDS:
            raise ConfigError(
                f"{path}: {where}.kind must be one of {', '.join(PROVIDER_KINDS)}, got {kind!r}"
            )
        decls.append(ProviderDecl(pname, kind))
    return CommandConfig(
        path=path.resolve(),
        name=name,
        command=argv("command"),
        enqueue=enqueue,
        workers=workers,
        lease_ttl_s=float(lease),
        ledger_dsn=dsn,
        providers=tuple(decls),
    )


class CommandAdapter:
    """A :class:`~harness.target.TargetAdapter` for a worker described by a config."""

    def __init__(self, config: CommandConfig, *, state_dir: Path) -> None:
        self.provider_name = config.providers[0].name
        self.config = config
        self.state_dir = state_dir
        self.client: Any = None
        self.env: dict[str, str] = {}
        self._last_arrivals = -1
        self._quiet_since = 0.0
        self._lease_ttl_s = config.lease_ttl_s

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
        payload = self.state_dir / "jobs" / f"{job_id}.json"
        payload.write_text(json.dumps({"job_id": job_id, "provider": provider, "body": body}))
        args = [a.format(job_id=job_id, payload_file=str(payload)) for a in self.config.enqueue]
        try:
            done = subprocess.run(
                self._abs(args),
                cwd=self.state_dir,
                env=self.env or None,
                capture_output=True,
                timeout=ENQUEUE_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InfrastructureError(f"enqueue command {args!r} failed: {exc}") from None
        if done.returncode != 0:
            raise InfrastructureError(
                f"enqueue command {args!r} exited {done.returncode}: "
                f"{done.stderr.decode(errors='replace').strip()[-300:]}"
            )

    def worker_argv(self) -> list[str]:
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
        if self.config.ledger_dsn is not None:
            env["CRASHPOINT_LEDGER_DSN"] = self.config.ledger_dsn
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
