"""Everything the agent reads from its environment, read once."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

BUGS = ("retry-without-lookup",)
#: The two tool calls of one job, in order.
PLAN = ("tickets", "chat")
DEFAULT_KINDS = {"tickets": "idempotent", "chat": "plain"}


def env_name(provider: str) -> str:
    """``<NAME>`` in ``CRASHPOINT_PROVIDER_<NAME>_URL``: upper case, other runs one ``_``."""
    return re.sub(r"[^A-Z0-9]+", "_", provider.upper()).strip("_")


@dataclass(frozen=True)
class Server:
    """One MCP tool server: its name, its kind, and its endpoint (``URL/mcp``)."""

    name: str
    kind: str
    endpoint: str


@dataclass(frozen=True)
class Settings:
    state_dir: Path
    worker_id: str
    lease_ttl_s: float
    call_timeout_s: float
    max_attempts: int
    recovery: bool
    bugs: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_env(
        cls, bugs: frozenset[str] = frozenset(), env: Mapping[str, str] | None = None
    ) -> Settings:
        """From the process's environment, or ``env`` (serve.py: a trial's)."""
        env = os.environ if env is None else env
        return cls(
            state_dir=Path(env.get("CRASHPOINT_STATE_DIR") or os.getcwd()).resolve(),
            worker_id=env.get("CRASHPOINT_WORKER_ID") or f"agent-{os.getpid()}",
            lease_ttl_s=float(env.get("CRASHPOINT_LEASE_TTL_S") or 1.0),
            call_timeout_s=float(env.get("CRASHPOINT_HTTP_TIMEOUT_S") or 2.0),
            max_attempts=int(env.get("CRASHPOINT_MAX_ATTEMPTS") or 3),
            recovery=env.get("CRASHPOINT_RECOVERY", "") not in ("", "0"),
            bugs=bugs,
        )

    @property
    def db_path(self) -> Path:
        return self.state_dir / "mcp-agent.db"

    def server(self, name: str) -> Server | None:
        url = os.environ.get(f"CRASHPOINT_PROVIDER_{env_name(name)}_URL", "")
        if not url:
            return None
        kind = os.environ.get(f"CRASHPOINT_PROVIDER_{env_name(name)}_KIND", "")
        kind = kind or DEFAULT_KINDS.get(name, "idempotent")
        return Server(name, kind, url.rstrip("/") + "/mcp")
