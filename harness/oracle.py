"""The oracle: the seven invariants, decided from provider ground truth first.

The oracle only reads: provider arrivals and effects (what really happened at the point
of consequence), the target's ledger when it has one (claims, result writes, final job
states), and the trial history. It never asks the worker what it thinks happened.

A write's outcome is *settled* when the provider answered it with an error before
committing anything: the worker was told, in a response it could read, that nothing
happened. Every other write (committed, dropped, held, or answered with a success the
worker may never have read) leaves the attempt possibly *unknown*, and a later write for
the same job must be covered: the same idempotency key at an idempotent provider, or a
successful lookup in between at a plain one. At an unqueryable provider nothing covers it.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fake_providers.models import Arrival, Effect

#: Invariants that speak of the end state; they need quiescence to be decided.
LIVENESS = frozenset({"nothing_lost"})


@dataclass(frozen=True)
class JobFinal:
    """A job's durable state at the end of a trial, as the target's ledger says."""

    job_id: str
    delivery_state: str
    execution_state: str
    side_effect_state: str
    needs_review: bool
    attempts: int


@dataclass(frozen=True)
class Claim:
    job_id: str
    token: int
    worker_id: str
    t_mono: float


@dataclass(frozen=True)
class ResultWrite:
    job_id: str
    token: int
    worker_id: str
    accepted: bool
    t_mono: float


@dataclass(frozen=True)
class LedgerFacts:
    """What a target's ledger can tell the oracle; every part is optional evidence."""

    jobs: Sequence[JobFinal] = ()
    claims: Sequence[Claim] = ()
    result_writes: Sequence[ResultWrite] = ()


@dataclass(frozen=True)
class OracleInput:
    jobs: Sequence[str]
    provider_kinds: dict[str, str]
    arrivals: Sequence[Arrival]
    effects: Sequence[Effect]
    ledger: LedgerFacts | None = None
    max_attempts: int = 3
    quiescent: bool = True
    #: Jobs whose only safe end is needs_review (an unprotectable cell, see DESIGN "Fairness").
    review_expected: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Violation:
    invariant: str
    job: str | None
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "job": self.job,
            "message": self.message,
            "evidence": self.evidence,
        }


def check(data: OracleInput) -> list[Violation]:
    """Every violation in the trial, safety first; liveness only at quiescence."""
    found: list[Violation] = []
    found += no_duplicate_effect(data)
    found += no_retry_while_unknown(data)
    found += stable_key_and_payload(data)
    found += fenced_writes(data)
    found += bounded_retries(data)
    found += ambiguity_goes_to_review(data)
    if data.quiescent:
        found += nothing_lost(data)
    return found


# -- helpers --------------------------------------------------------------------------


def _writes_by_job(arrivals: Iterable[Arrival]) -> dict[tuple[str, str], list[Arrival]]:
    out: dict[tuple[str, str], list[Arrival]] = defaultdict(list)
    for a in arrivals:
        if a.kind == "write" and a.job_id is not None:
            out[(a.provider, a.job_id)].append(a)
    for writes in out.values():
        writes.sort(key=lambda a: a.t_mono)
    return out


def settled(write: Arrival) -> bool:
    """The provider answered with an error and committed nothing: the outcome is known."""
    return (not write.committed) and write.status is not None and write.status >= 400


def _row(a: Arrival) -> dict[str, Any]:
    return {
        "id": a.id,
        "t_mono": a.t_mono,
        "provider": a.provider,
        "kind": a.kind,
        "method": a.method,
        "path": a.path,
        "job_id": a.job_id,
        "idempotency_key": a.idempotency_key,
        "client_marker": a.client_marker,
        "fingerprint": a.fingerprint,
        "fencing_token": a.fencing_token,
        "worker_id": a.worker_id,
        "status": a.status,
        "committed": a.committed,
        "replayed": a.replayed,
        "fault": a.fault,
    }


def _effect_row(e: Effect) -> dict[str, Any]:
    return {
        "id": e.id,
        "provider": e.provider,
        "job_id": e.job_id,
        "idempotency_key": e.idempotency_key,
        "client_marker": e.client_marker,
        "fingerprint": e.fingerprint,
        "arrival_id": e.arrival_id,
        "t_mono": e.t_mono,
    }


def _token(a: Arrival) -> int | None:
    if a.fencing_token is None:
        return None
    try:
        return int(a.fencing_token)
    except ValueError:
        return None


def _identity(a: Arrival) -> str | None:
    """The name a worker gives a logical job at this provider: its key or its marker."""
    return a.idempotency_key if a.idempotency_key is not None else a.client_marker


# -- the invariants -------------------------------------------------------------------


def no_duplicate_effect(data: OracleInput) -> list[Violation]:
    """1. At most one committed effect per logical job per provider."""
    per: dict[tuple[str, str], list[Effect]] = defaultdict(list)
    for e in data.effects:
        if e.job_id is not None:
            per[(e.provider, e.job_id)].append(e)
    out = []
    for (provider, job), effects in sorted(per.items()):
        if len(effects) > 1:
            out.append(
                Violation(
                    "no_duplicate_effect",
                    job,
                    f"{len(effects)} committed effects for {job} at {provider}",
                    {"effects": [_effect_row(e) for e in effects]},
                )
            )
    return out


def no_retry_while_unknown(data: OracleInput) -> list[Violation]:
    """2. No write follows an unsettled write for the job unless it is covered.

    Idempotent providers: covered by carrying the same key. Plain providers: covered by a
    lookup for the job answered 200 between the two writes. Unqueryable providers are
    left to invariant 7, which owns them.
    """
    out = []
    lookups = [a for a in data.arrivals if a.kind == "lookup"]
    for (provider, job), writes in sorted(_writes_by_job(data.arrivals).items()):
        kind = data.provider_kinds.get(provider, "plain")
        if kind == "unqueryable":
            continue
        for earlier, later in itertools.pairwise(writes):
            if settled(earlier):
                continue
            if kind == "idempotent":
                if later.idempotency_key == earlier.idempotency_key:
                    continue
                why = (
                    f"write #{later.id} for {job} used key {later.idempotency_key!r} while "
                    f"write #{earlier.id} under key {earlier.idempotency_key!r} was unknown"
                )
            else:
                covering = [
                    lk
                    for lk in lookups
                    if lk.provider == provider
                    and lk.status == 200
                    and earlier.t_mono < lk.t_mono < later.t_mono
                    and (lk.job_id == job or lk.client_marker == earlier.client_marker)
                ]
                if covering:
                    continue
                why = (
                    f"write #{later.id} for {job} was sent after write #{earlier.id} "
                    f"(status {earlier.status}, committed={earlier.committed}) with no "
                    "successful lookup in between"
                )
            out.append(
                Violation(
                    "no_retry_while_unknown",
                    job,
                    why,
                    {"arrivals": [_row(earlier), _row(later)]},
                )
            )
    return out


def stable_key_and_payload(data: OracleInput) -> list[Violation]:
    """3. Every write of one logical job carries one key (or marker) and one fingerprint."""
    out = []
    for (provider, job), writes in sorted(_writes_by_job(data.arrivals).items()):
        identities = {_identity(w) for w in writes}
        prints = {w.fingerprint for w in writes}
        if len(identities) > 1:
            out.append(
                Violation(
                    "stable_key_and_payload",
                    job,
                    f"{len(identities)} different keys or markers for {job} at {provider}: "
                    f"{sorted(str(i) for i in identities)}",
                    {"arrivals": [_row(w) for w in writes]},
                )
            )
        if len(prints) > 1:
            out.append(
                Violation(
                    "stable_key_and_payload",
                    job,
                    f"{len(prints)} different payload fingerprints for {job} at {provider}",
                    {"arrivals": [_row(w) for w in writes]},
                )
            )
    return out


def fenced_writes(data: OracleInput) -> list[Violation]:
    """4. No result accepted, and no external call made, under a stale lease token."""
    if data.ledger is None or not data.ledger.claims:
        return []
    claims: dict[str, list[Claim]] = defaultdict(list)
    for c in data.ledger.claims:
        claims[c.job_id].append(c)

    def newer_claim(job: str, token: int, t: float) -> Claim | None:
        newer = [c for c in claims.get(job, []) if c.token > token and c.t_mono < t]
        return min(newer, key=lambda c: c.t_mono) if newer else None

    out = []
    for w in data.ledger.result_writes:
        if not w.accepted:
            continue
        stale_by = newer_claim(w.job_id, w.token, w.t_mono)
        if stale_by is not None:
            out.append(
                Violation(
                    "fenced_writes",
                    w.job_id,
                    f"result write by {w.worker_id} under token {w.token} was accepted after "
                    f"{stale_by.worker_id} claimed token {stale_by.token}",
                    {"ledger": [_asdict(w), _asdict(stale_by)]},
                )
            )
    for a in data.arrivals:
        token = _token(a)
        if a.kind != "write" or a.job_id is None or token is None:
            continue
        stale_by = newer_claim(a.job_id, token, a.t_mono)
        if stale_by is not None:
            out.append(
                Violation(
                    "fenced_writes",
                    a.job_id,
                    f"external call #{a.id} by {a.worker_id} under token {token} reached "
                    f"{a.provider} after {stale_by.worker_id} claimed token {stale_by.token}",
                    {"arrivals": [_row(a)], "ledger": [_asdict(stale_by)]},
                )
            )
    return out


def nothing_lost(data: OracleInput) -> list[Violation]:
    """5. At quiescence every job ended: one effect, or needs_review / dead-lettered."""
    effects: dict[str, list[Effect]] = defaultdict(list)
    for e in data.effects:
        if e.job_id is not None:
            effects[e.job_id].append(e)
    finals = {j.job_id: j for j in data.ledger.jobs} if data.ledger else {}
    out = []
    for job in data.jobs:
        n = len(effects.get(job, []))
        final = finals.get(job)
        if final is None:
            if data.ledger is not None and data.ledger.jobs:
                out.append(Violation("nothing_lost", job, f"{job} is missing from the ledger"))
            elif n == 0 and job not in data.review_expected:
                out.append(Violation("nothing_lost", job, f"{job} ended with no effect"))
            continue
        row = _asdict(final)
        if final.delivery_state == "acknowledged" and n != 1:
            out.append(
                Violation(
                    "nothing_lost",
                    job,
                    f"{job} is acknowledged but has {n} committed effects",
                    {"ledger": [row], "effects": [_effect_row(e) for e in effects.get(job, [])]},
                )
            )
        elif final.needs_review or final.delivery_state in ("acknowledged", "dead_lettered"):
            continue
        else:
            out.append(
                Violation(
                    "nothing_lost",
                    job,
                    f"{job} ended {final.delivery_state}/{final.execution_state}: neither "
                    "completed, dead-lettered nor in needs_review",
                    {"ledger": [row]},
                )
            )
    return out


def bounded_retries(data: OracleInput) -> list[Violation]:
    """6. Attempts never exceed the configured maximum."""
    out = []
    for (provider, job), writes in sorted(_writes_by_job(data.arrivals).items()):
        if len(writes) > data.max_attempts:
            out.append(
                Violation(
                    "bounded_retries",
                    job,
                    f"{len(writes)} writes for {job} reached {provider}; the maximum is "
                    f"{data.max_attempts}",
                    {"arrivals": [_row(w) for w in writes]},
                )
            )
    if data.ledger is not None:
        for j in data.ledger.jobs:
            if j.attempts > data.max_attempts:
                out.append(
                    Violation(
                        "bounded_retries",
                        j.job_id,
                        f"{j.job_id} ran {j.attempts} attempts; the maximum is {data.max_attempts}",
                        {"ledger": [_asdict(j)]},
                    )
                )
    return out


def ambiguity_goes_to_review(data: OracleInput) -> list[Violation]:
    """7. An unknown that cannot be reconciled is never replayed, and ends in review."""
    out = []
    for (provider, job), writes in sorted(_writes_by_job(data.arrivals).items()):
        if data.provider_kinds.get(provider) != "unqueryable":
            continue
        for earlier, later in itertools.pairwise(writes):
            if not settled(earlier):
                out.append(
                    Violation(
                        "ambiguity_goes_to_review",
                        job,
                        f"write #{later.id} for {job} replayed an unknown write #{earlier.id} "
                        f"at unqueryable {provider}",
                        {"arrivals": [_row(earlier), _row(later)]},
                    )
                )
                break
    if data.ledger is not None and data.quiescent:
        for j in data.ledger.jobs:
            if j.job_id in data.review_expected and not j.needs_review:
                out.append(
                    Violation(
                        "ambiguity_goes_to_review",
                        j.job_id,
                        f"{j.job_id} could only be protected by review but ended "
                        f"{j.delivery_state}/{j.execution_state}",
                        {"ledger": [_asdict(j)]},
                    )
                )
    return out


def _asdict(obj: JobFinal | Claim | ResultWrite) -> dict[str, Any]:
    return dict(obj.__dict__)
