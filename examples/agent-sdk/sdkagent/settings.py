"""Everything the agent reads from its environment, read once."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

#: The deliberate bugs, one per buggy crashpoint-buggy-*.toml (README.md).
BUGS = ("sdk-auto-key", "repost-without-lookup", "409-new-key", "key-from-plan")
#: The providers a job touches: the model plans, billing charges, chat tells.
MODEL, BILLING, CHAT = "model", "billing", "chat"
#: The tool each effect provider is called for, in the plan.
TOOL_PROVIDER = {"charge": BILLING, "notify": CHAT}
#: Where the job's message goes: a fixed channel of the team's workspace.
CHANNEL = "C0BILLING"


def env_name(provider: str) -> str:
    """``<NAME>`` in ``CRASHPOINT_PROVIDER_<NAME>_URL``: upper case, other runs one ``_``."""
    return re.sub(r"[^A-Z0-9]+", "_", provider.upper()).strip("_")


def provider_url(name: str) -> str:
    return os.environ.get(f"CRASHPOINT_PROVIDER_{env_name(name)}_URL", "").rstrip("/")


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
    def from_env(cls, bugs: frozenset[str] = frozenset()) -> Settings:
        env = os.environ
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
        return self.state_dir / "agent-sdk.db"

    @property
    def model_base_url(self) -> str:
        """The openai SDK's base URL: ``OPENAI_BASE_URL`` (crashpoint.toml's ``env``, which
        the SDK would read by itself), else the model provider's URL + ``/v1``."""
        return os.environ.get("OPENAI_BASE_URL") or provider_url(MODEL) + "/v1"


def task(job_id: str, body: dict[str, object]) -> dict[str, object]:
    """The document the agent hands the model for one job: what to charge, whom to tell.

    The model's tool calls are read from it (docs/providers.md, "openai"): ``charge``'s
    arguments are the ``charge`` object, ``notify``'s the ``notify`` object.
    """
    amount = int(str(body.get("amount_cents") or 0)) or 100
    return {
        "job_id": job_id,
        "charge": {"amount": amount, "currency": "usd"},
        "notify": {"channel": CHANNEL, "text": f"Charged {amount / 100:.2f} USD for {job_id}."},
    }
