"""Everything the example reads from its environment, read once."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

BUGS = ("close-without-effect", "new-key-on-retry", "no-cap", "rerun-on-ack-error")
#: The retry cap the no-cap bug uses whatever the worker declared.
NO_CAP_WRITES = 6
KINDS = ("idempotent", "plain", "unqueryable")


def env_name(provider: str) -> str:
    """``<NAME>`` in ``CRASHPOINT_PROVIDER_<NAME>_URL``: upper case, other runs one ``_``."""
    return re.sub(r"[^A-Z0-9]+", "_", provider.upper()).strip("_")


@dataclass(frozen=True)
class Provider:
    name: str
    kind: str
    url: str


@dataclass(frozen=True)
class Settings:
    state_dir: Path
    worker_id: str
    lease_ttl_s: float
    http_timeout_s: float
    max_attempts: int
    recovery: bool
    redis_url: str
    failpoints: str
    bugs: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_env(cls, bugs: frozenset[str] = frozenset()) -> Settings:
        env = os.environ
        state = Path(env.get("CRASHPOINT_STATE_DIR") or os.getcwd()).resolve()
        return cls(
            state_dir=state,
            worker_id=env.get("CRASHPOINT_WORKER_ID") or f"rq-{os.getpid()}",
            lease_ttl_s=float(env.get("CRASHPOINT_LEASE_TTL_S") or 1.0),
            http_timeout_s=float(env.get("CRASHPOINT_HTTP_TIMEOUT_S") or 2.0),
            max_attempts=int(env.get("CRASHPOINT_MAX_ATTEMPTS") or 3),
            recovery=env.get("CRASHPOINT_RECOVERY", "") not in ("", "0"),
            redis_url=env.get("REDIS_URL") or "redis://127.0.0.1:6379/0",
            failpoints=env.get("CRASHPOINT_FAILPOINTS") or "",
            bugs=bugs,
        )

    @property
    def namespace(self) -> str:
        # Trials share one Redis server; each trial's state directory is its own, so a
        # hash of its path keeps their queues and keys apart.
        return hashlib.sha256(str(self.state_dir).encode()).hexdigest()[:16]

    @property
    def queue_name(self) -> str:
        return f"crashpoint-{self.namespace}"

    def redis_key(self, *parts: str) -> str:
        return ":".join(("crashpoint", self.namespace, *parts))

    @property
    def db_path(self) -> Path:
        return self.state_dir / "rq-billing.db"

    @property
    def write_cap(self) -> int:
        """Writes per job per provider before the job is dead-lettered."""
        return NO_CAP_WRITES if "no-cap" in self.bugs else self.max_attempts

    def provider(self, name: str, kind: str = "idempotent") -> Provider | None:
        """``name``'s URL and kind from the environment; ``kind`` unless it says one."""
        url = os.environ.get(f"CRASHPOINT_PROVIDER_{env_name(name)}_URL", "")
        if not url:
            return None
        kind = os.environ.get(f"CRASHPOINT_PROVIDER_{env_name(name)}_KIND", "") or kind
        return Provider(name, kind, url.rstrip("/"))
