"""The seam every persona plugs into: a real API's wire format over one provider.

A persona reads a vendor's request into the fields every arrival records (job, key,
marker, the payload that is fingerprinted) and writes the provider's answers, errors
and faults included, in the vendor's own shapes. Everything else is the provider's:
the store, the fault board, holds, identities, the seal and the oracle API. So an
injected 503 reaches a Stripe SDK as Stripe's ``api_error`` and a hold after commit is
the same rendezvous whatever the wire says.

A persona maps onto one of the three kinds (``kind``): its key is the idempotent
kind's key, its lookup the plain kind's lookup, or it has none (unqueryable).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from fake_providers.messages import Reply, Request
from fake_providers.problems import Problem

if TYPE_CHECKING:
    from fake_providers.store import Store

#: A route's handler: called once the method matched.
Handler = Callable[[], Reply]


@dataclass(frozen=True)
class Parsed:
    """A vendor write, read into what the provider records and fingerprints.

    ``payload`` is what "the same request" means for the vendor (Stripe compares the
    parameters of a request under one key); it is fingerprinted and must not hold the
    marker. ``resource`` names what the write creates (``payment_intent``), and
    ``extra`` carries what the persona needs to write its answer (a Slack channel).
    """

    payload: dict[str, Any]
    job_id: str | None
    key: str | None = None
    marker: str | None = None
    resource: str = "effect"
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Created:
    """What a committed write answers, and the vendor object it stored.

    ``body`` is sent (and replayed byte for byte under an idempotency key);
    ``object_id`` and ``obj`` are what later retrieves, lists and searches return.
    """

    status: int
    body: bytes
    object_id: str
    obj: Mapping[str, Any]
    headers: tuple[tuple[str, str], ...] = ()


class Host(Protocol):
    """What a persona may ask of the provider it fronts."""

    store: Store
    name: str

    def write(self, req: Request, path: str, parsed: Parsed | Problem) -> Reply:
        """Record, fault and commit a parsed write; answers through the persona."""
        ...

    def lookup(
        self,
        req: Request,
        path: str,
        *,
        job_id: str | None,
        key: str | None = None,
        marker: str | None = None,
        answer: Callable[[], Reply],
    ) -> Reply:
        """Record a lookup, apply ``fail_lookup`` and identity faults, then ``answer``."""
        ...


class Persona(Protocol):
    """A wire format. One instance per provider process; it keeps no state of its own
    (the store holds everything, so a provider restart loses nothing)."""

    #: The persona's name, as ``kind`` in crashpoint.toml (``stripe``).
    name: str
    #: The provider kind whose semantics it has: idempotent, plain or unqueryable.
    kind: str
    #: The header that carries the replay flag on a replayed answer, or None.
    replay_header: tuple[str, str] | None

    def routes(
        self, host: Host, req: Request, path: str, query: dict[str, list[str]]
    ) -> Mapping[str, Handler] | None:
        """The handlers for ``path`` by method, or None when the persona has no such route."""
        ...

    def created(self, parsed: Parsed, effect: Mapping[str, Any]) -> Created:
        """The answer to a committed write; ``effect`` is the new effect row (``id``,
        ``external_id``, ``t_wall``, ...), so ids and times are derived, not drawn."""
        ...

    def error(self, problem: Problem, *, path: str) -> Reply:
        """``problem`` in the vendor's error envelope and status (401, 409, 429, 5xx, ...)."""
        ...
