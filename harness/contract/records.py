"""Ground-truth records: what a provider saw (:class:`Arrival`) and what it committed
(:class:`Effect`).

The providers write them (``fake_providers``, which re-exports both from
``fake_providers.models``) and the oracle reads them; both import them from here, so
the oracle needs nothing of the providers. Import-free, like the rest of the contract.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Arrival:
    """One request that reached a provider: a write or a lookup on the business API, or
    (``kind == "control_denied"``) a control or oracle call refused for want of the secret.

    ``status`` is None when no response was sent (the connection was dropped, or the
    request is still being handled). ``fault`` names the fault action that acted on it.
    """

    id: int
    t_mono: float
    t_wall: float
    provider: str
    kind: str
    method: str
    path: str
    job_id: str | None
    idempotency_key: str | None
    client_marker: str | None
    fingerprint: str | None
    fencing_token: str | None
    worker_id: str | None
    peer_pid: int | None
    status: int | None
    committed: bool
    replayed: bool
    effect_id: int | None
    fault: str | None
    #: The identity (profile, account) the request was made under, from the
    #: ``X-Crashpoint-Identity`` header; None when the worker sent none. Last, with a
    #: default, so histories recorded before it still load.
    identity: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Arrival:
        return cls(**known_fields(cls, data))


@dataclass(frozen=True)
class Effect:
    """One side effect committed at a provider: the ground truth the oracle counts."""

    id: int
    provider: str
    job_id: str | None
    idempotency_key: str | None
    client_marker: str | None
    fingerprint: str
    arrival_id: int
    t_mono: float
    t_wall: float
    #: The provider's record id for the effect (what a worker keeps as its external
    #: reference); None in effect logs written before providers gave one.
    external_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Effect:
        return cls(**known_fields(cls, data))


def known_fields(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """The items of ``data`` that name a field of ``cls``: a newer server may add
    fields, and old clients keep working."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}
