"""Traceability: every effect tied to its job, attempt, key and the provider's record id.

A reviewer holding a customer's complaint ("I got two emails") starts from the provider's
record and needs the job, the attempt and the key that made it; an operator holding a
job needs the record it made. :func:`trace_rows` gives one row per committed effect from
provider truth; the run id is the results document's. A job the target closed as done
must have kept the provider's record id (seed 003: "check that logs connect the run ID,
idempotency key, and external record ID"): :func:`untraced_effect` is the warning when it
did not, or when what it kept names none of the job's effects.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from harness.contract.records import Arrival, Effect
from harness.history import Event
from harness.oracle.evidence import Violation, violation
from harness.oracle.facts import Record, TrialFacts, read, token
from harness.oracle.warn import WARNINGS

WARNING = "untraced_effect"


def references(effect: Effect) -> frozenset[str]:
    """What a worker may have kept to name ``effect``: its record id, or the integer id of
    providers' answers (workers written against the ``id`` field)."""
    refs = {str(effect.id)}
    if effect.external_id is not None:
        refs.add(effect.external_id)
    return frozenset(refs)


def untraced_effect(record: Record, facts: TrialFacts) -> list[Violation]:
    """A job the target reports done without the record id of an effect it made."""
    if facts.job_states is None:
        return []
    effects: dict[str, list[Effect]] = defaultdict(list)
    for e in record.effects:
        if e.job_id is not None:
            effects[e.job_id].append(e)
    out = []
    for final in facts.job_states:
        if final.delivery_state != "acknowledged":
            continue
        made = effects.get(final.job_id, [])
        ref = final.external_ref
        if ref is None or not ref.strip():
            ids = ", ".join(e.external_id or str(e.id) for e in made) or "none"
            message = (
                f"{final.job_id} is done but the target kept no external reference for "
                f"it (the provider's record ids: {ids}); record the id the provider "
                "answers with, so the run, the job, its key and the record can be tied"
            )
        elif made and not any(ref in references(e) for e in made):
            ids = ", ".join(e.external_id or str(e.id) for e in made)
            message = (
                f"{final.job_id} is done with external reference {ref!r}, which names none "
                f"of its effects ({ids})"
            )
        else:
            continue
        out.append(violation(WARNING, final.job_id, message, record, effects=made, ledger=[final]))
    return out


WARNINGS[WARNING] = untraced_effect


def trace_rows(events: Sequence[Event], facts: TrialFacts) -> list[dict[str, Any]]:
    """:func:`trace_in` of ``events`` read on their own."""
    return trace_in(read(events), facts)


def trace_in(record: Record, facts: TrialFacts) -> list[dict[str, Any]]:
    """One row per committed effect: job, provider, attempt, key or marker, the provider's
    record id, what the target kept for the job, and the commit's event index."""
    by_arrival = {(a.provider, a.id): a for a in record.arrivals}
    finals = {j.job_id: j for j in facts.job_states or ()}
    rows = []
    for effect in record.effects:
        arrival = by_arrival.get((effect.provider, effect.arrival_id))
        final = finals.get(effect.job_id or "")
        rows.append(
            {
                "job": effect.job_id,
                "provider": effect.provider,
                "attempt": _attempt(effect, arrival, record),
                "idempotency_key": effect.idempotency_key,
                "client_marker": effect.client_marker,
                "external_id": effect.external_id,
                "effect_id": effect.id,
                "recorded_ref": final.external_ref if final is not None else None,
                "event": record.index.get(effect),
            }
        )
    return rows


def _attempt(effect: Effect, arrival: Arrival | None, record: Record) -> int | None:
    """The attempt whose write committed ``effect``: the claim of the token the write
    carried, else the last attempt the worker named for the job before the write."""
    if effect.job_id is None:
        return None
    tok = token(arrival) if arrival is not None else None
    if tok is not None and (effect.job_id, tok) in record.claim_attempts:
        return record.claim_attempts[(effect.job_id, tok)]
    sent_at = arrival.t_mono if arrival is not None else effect.t_mono
    named = [n for t, n in record.named_attempts.get(effect.job_id, ()) if t <= sent_at]
    return named[-1] if named else None
