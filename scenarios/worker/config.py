"""The worker's configuration: environment variables only, read once at start."""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from harness.contract import env as names
from harness.contract.errors import ConfigError
from harness.contract.vocabulary import PROVIDER_KINDS


class ProviderSpec(NamedTuple):
    kind: str
    url: str


class WorkerConfig(NamedTuple):
    ledger_dsn: str
    worker_id: str
    providers: Mapping[str, ProviderSpec] = MappingProxyType({})
    ledger_schema: str | None = None
    state_dir: str | None = None
    recovery: bool = False
    mutant: str | None = None
    lease_ttl_s: float = 1.0
    http_timeout_s: float = 2.0
    max_attempts: int = 3
    #: Between two claims (or outbox reads) that found nothing. Nothing announces a new
    #: job, a lapsed lease or a pending outbox row, so the ledger is asked again; an
    #: empty claim costs about 0.3 ms of CPU, so an idle worker burns some 15 ms a
    #: second, and a trial's workers are idle too little of it for that to show (a run
    #: of the demo's cells used the same CPU at 0.5 s as at this). Short, because a
    #: job's wait for its claim, and a reclaim after a lease lapses, is up to this long.
    poll_s: float = 0.02
    #: A job's first retry after a refused call; later ones double it. Well above what a
    #: retry with no backoff at all takes here (a claim poll, perhaps another job's
    #: attempt first): 0.05 s left a loaded machine's 67 and 133 ms gaps of the
    #: retry_without_backoff mutant looking like a correct worker's.
    backoff_s: float = 0.2
    #: Outbox mode: an attempt writes its message to the ledger's outbox and a relay
    #: process sends it (``CRASHPOINT_OUTBOX=1``).
    outbox: bool = False
    #: ``worker`` (claims jobs) or ``relay`` (sends outbox rows): ``CRASHPOINT_ROLE``.
    role: str = "worker"
    #: Pool mode: each claimed job's attempt runs in a child process the worker forks,
    #: as a prefork pool's parent dispatches to its children (``CRASHPOINT_POOL=1``).
    pool: bool = False
    #: The version of the worker's code: 2 names its keys differently and recovers
    #: version 1's attempts (``CRASHPOINT_WORKER_VERSION``, or ``--version 2``).
    version: int = 1

    def provider(self, name: str) -> ProviderSpec | None:
        return self.providers.get(names.provider_env_name(name))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WorkerConfig:
        env = os.environ if env is None else env
        dsn = env.get("CRASHPOINT_LEDGER_DSN")
        if not dsn:
            raise ConfigError(
                "CRASHPOINT_LEDGER_DSN is not set; set it to sqlite:///ledger.db or a "
                "postgresql:// DSN"
            )
        providers = {}
        for var, url in env.items():
            m = names.PROVIDER_URL_VAR.match(var)
            if m is None:
                continue
            name = m["name"]
            kind = env.get(names.provider_kind_var(name), "idempotent")
            if kind not in PROVIDER_KINDS:
                raise ConfigError(
                    f"CRASHPOINT_PROVIDER_{name}_KIND={kind!r} is unknown; use one of "
                    f"{', '.join(PROVIDER_KINDS)}"
                )
            providers[name] = ProviderSpec(kind, url.rstrip("/"))
        mutant = env.get("CRASHPOINT_MUTANT") or None
        if mutant is not None:
            from scenarios.mutants import MUTANTS

            if mutant not in MUTANTS:
                raise ConfigError(
                    f"CRASHPOINT_MUTANT={mutant!r} is unknown; use one of {', '.join(MUTANTS)}"
                )
        return cls(
            ledger_dsn=dsn,
            worker_id=env.get("CRASHPOINT_WORKER_ID") or f"worker-{os.getpid()}",
            providers=providers,
            ledger_schema=env.get("CRASHPOINT_LEDGER_SCHEMA") or None,
            state_dir=env.get("CRASHPOINT_STATE_DIR") or None,
            recovery=env.get("CRASHPOINT_RECOVERY", "") not in ("", "0"),
            mutant=mutant,
            lease_ttl_s=_number(env, "CRASHPOINT_LEASE_TTL_S", 1.0),
            http_timeout_s=_number(env, "CRASHPOINT_HTTP_TIMEOUT_S", 2.0),
            max_attempts=int(_number(env, "CRASHPOINT_MAX_ATTEMPTS", 3)),
            poll_s=_number(env, "CRASHPOINT_POLL_S", 0.02),
            backoff_s=_number(env, "CRASHPOINT_BACKOFF_S", 0.2),
            outbox=env.get("CRASHPOINT_OUTBOX", "") not in ("", "0"),
            role=_role(env),
            pool=env.get("CRASHPOINT_POOL", "") not in ("", "0"),
            version=_version(env.get("CRASHPOINT_WORKER_VERSION") or "1"),
        )


def _number(env: Mapping[str, str], var: str, default: float) -> float:
    raw = env.get(var)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{var}={raw!r} is not a number; set it like {var}={default}") from None
    if value <= 0:
        raise ConfigError(f"{var}={raw!r} must be positive; set it like {var}={default}")
    return value


ROLES = ("worker", "relay")


def _role(env: Mapping[str, str]) -> str:
    role = env.get("CRASHPOINT_ROLE") or "worker"
    if role not in ROLES:
        raise ConfigError(f"CRASHPOINT_ROLE={role!r} is unknown; use one of {', '.join(ROLES)}")
    return role


#: The versions of the reference worker's code.
VERSIONS = ("1", "2")


def _version(raw: str) -> int:
    if raw not in VERSIONS:
        raise ConfigError(
            f"CRASHPOINT_WORKER_VERSION={raw!r} is unknown; use one of {', '.join(VERSIONS)}"
        )
    return int(raw)


def version_flag(argv: list[str], env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with ``--version N`` from the command line in it (the reference's
    upgraded command is its own command with the flag)."""
    if len(argv) == 2 and argv[0] == "--version":
        return {**env, "CRASHPOINT_WORKER_VERSION": argv[1]}
    if argv:
        raise ConfigError(f"unknown arguments {argv!r}; the only one is --version 2")
    return dict(env)
