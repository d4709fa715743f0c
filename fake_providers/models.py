"""The records the providers speak in: faults, holds, arrivals and effects.

Frozen dataclasses shared by the server (which writes them as JSON) and the client
(which reads them back), so one definition fixes both ends of the wire.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

# Re-exported: the records moved to the contract, which the oracle reads them from.
from harness.contract.records import Arrival as Arrival
from harness.contract.records import Effect as Effect
from harness.contract.vocabulary import PROVIDER_KINDS

KINDS = PROVIDER_KINDS
Kind = Literal["idempotent", "plain", "unqueryable"]

#: Fault actions that act on writes, and the one that acts on lookups.
WRITE_ACTIONS = (
    "fail_before_commit",
    "hold_before_commit",
    "hold_after_commit",
    "drop_after_commit",
    "delay_response",
)
LOOKUP_ACTIONS = ("fail_lookup",)
#: Actions only a model persona (``openai``) consumes: a retried job's next plan is
#: another one (docs/providers.md, "openai").
PLAN_ACTIONS = ("replan", "replan_changed")
ACTIONS = WRITE_ACTIONS + LOOKUP_ACTIONS + PLAN_ACTIONS
HOLD_ACTIONS = ("hold_before_commit", "hold_after_commit")

#: Arrival kinds: business requests, and calls refused at the seal (no or wrong secret).
#: A ``plan`` is a model's answer (the openai persona): recorded, never an effect, and
#: never a reconcile of the job it plans.
WRITE = "write"
LOOKUP = "lookup"
DENIED = "control_denied"
PLAN = "plan"
ARRIVAL_KINDS = (WRITE, LOOKUP, DENIED, PLAN)

#: ``release`` outcomes; ``respond`` is accepted as a clearer name for ``commit`` after commit.
OUTCOMES = ("commit", "drop", "respond")


@dataclass(frozen=True)
class Fault:
    """A fault to arm at a provider for the next matching request(s).

    ``job``, ``key`` and ``marker`` narrow the match (all given must match; none given
    matches any request). ``times`` is how many requests it acts on. ``status`` is the
    5xx (or 429) that ``fail_before_commit`` and ``fail_lookup`` answer (every fault carries a
    5xx, used or not); ``delay_s`` is the pause of ``delay_response``.

    ``release_after_s`` (hold actions only) is the provider's own deadline for a held
    request, counted from the hold on its monotonic clock: the harness's release may come
    earlier, but however late it comes (a loaded machine), the request is let go by then,
    with ``release_outcome``. None: held until released (or ``--hold-max-s``).
    """

    action: str
    job: str | None = None
    key: str | None = None
    marker: str | None = None
    times: int = 1
    status: int = 503
    delay_s: float = 0.0
    release_after_s: float | None = None
    release_outcome: str = "commit"

    def __post_init__(self) -> None:
        # Faults arrive as JSON from anyone holding the secret: check types as well as
        # values, or a string status or a NaN delay would only fail while answering.
        if not isinstance(self.action, str) or self.action not in ACTIONS:
            raise ValueError(
                f"Fault action={self.action!r} is unknown; use one of {', '.join(ACTIONS)}"
            )
        for name in ("job", "key", "marker"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"Fault {name}={value!r} must be a string or null")
        if not _is_int(self.times) or self.times < 1:
            raise ValueError(f"Fault times={self.times!r} must be an integer of at least 1")
        # 429 too: a rate limit refuses before commit exactly as a 5xx does, and the
        # vendors' SDKs treat it apart (Retry-After, their own rate-limit retries).
        if not _is_int(self.status) or not (500 <= self.status <= 599 or self.status == 429):
            raise ValueError(
                f"Fault status={self.status!r} must be a 5xx status or 429 (an integer)"
            )
        if (
            isinstance(self.delay_s, bool)
            or not isinstance(self.delay_s, int | float)
            or not 0 <= self.delay_s < math.inf
        ):
            raise ValueError(
                f"Fault delay_s={self.delay_s!r} must be a finite number of seconds, not negative"
            )
        self._check_deadline()

    def _check_deadline(self) -> None:
        after = self.release_after_s
        if after is not None:
            if isinstance(after, bool) or not isinstance(after, int | float):
                raise ValueError(
                    f"Fault release_after_s={after!r} must be a number of seconds or null"
                )
            if not 0 <= after < math.inf:
                raise ValueError(
                    f"Fault release_after_s={after!r} must be finite and not negative "
                    f"(seconds from the hold)"
                )
            if self.action not in HOLD_ACTIONS:
                raise ValueError(
                    f"Fault release_after_s is for hold faults only ({', '.join(HOLD_ACTIONS)}); "
                    f"{self.action!r} never holds"
                )
        if not isinstance(self.release_outcome, str) or self.release_outcome not in OUTCOMES:
            raise ValueError(
                f"Fault release_outcome={self.release_outcome!r} is unknown; "
                f"use one of {', '.join(OUTCOMES)}"
            )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fault:
        known = _known(cls, data)
        for name in ("times", "status"):
            if name in known:
                known[name] = json_int(known[name])
        return cls(**known)


@dataclass(frozen=True)
class Held:
    """A request a provider is holding for a rendezvous with the harness."""

    fault_id: str
    action: str
    arrival_id: int
    job_id: str | None
    idempotency_key: str | None
    client_marker: str | None
    committed: bool
    effect_id: int | None
    t_mono: float
    #: None while it is held; ``deadline`` when the provider let it go at its own
    #: deadline before the harness asked (a late waiter still meets it).
    released_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Held:
        return cls(**_known(cls, data))


def json_int(value: Any) -> Any:
    """``value`` as an int if it is a JSON integer written with a fraction (``3.0``).

    JSON Schema counts 3.0 as an integer, so a client may send one; anything else is
    returned as it came, for the validation to name.
    """
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    # Ignore fields a newer server may add, so old clients keep working.
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}
