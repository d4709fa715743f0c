"""The review desk: what a human needs to decide each job that ended in needs_review.

Seed 003: "put the job in a review queue with the key, attempted action, timestamp,
error, and last known external state". One row per such job, read from the history
(the job's last write at a provider and the last answer it had from one) and the
target's end state (its recorded error and reason); the report lists them on one page
with links into the trial's timeline.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from harness.contract.records import Arrival
from harness.history import Event
from harness.oracle.facts import JobFinal, Record, TrialFacts, identity, read


def review_rows(events: Sequence[Event], facts: TrialFacts) -> list[dict[str, Any]]:
    """:func:`review_in` of ``events`` read on their own."""
    return review_in(read(events), facts)


def review_in(record: Record, facts: TrialFacts) -> list[dict[str, Any]]:
    """One row per job the target reports in needs_review, in job order."""
    if facts.job_states is None:
        return []
    return [
        _row(final, record)
        for final in sorted(facts.job_states, key=lambda j: j.job_id)
        if final.needs_review
    ]


def _row(final: JobFinal, record: Record) -> dict[str, Any]:
    job = final.job_id
    mine = [a for a in record.arrivals if a.job_id == job]
    writes = [a for a in mine if a.kind == "write"]
    last_write = writes[-1] if writes else None
    effects = [e for e in record.effects if e.job_id == job]
    cited = [record.arrival_index[(a.provider, a.id)] for a in mine]
    cited += [record.index[e] for e in effects]
    cited += record.signals
    key = final.idempotency_key or (identity(last_write) if last_write is not None else None)
    return {
        "job": job,
        "idempotency_key": key,
        "client_marker": last_write.client_marker if last_write is not None else None,
        "action": _action(last_write),
        "provider": last_write.provider if last_write is not None else None,
        "at_event": record.arrival_index.get((last_write.provider, last_write.id))
        if last_write is not None
        else None,
        "at_wall": _wall(last_write.t_wall) if last_write is not None else None,
        "last_error": final.last_error or _no_error(last_write),
        "review_reason": final.review_reason,
        "external_state": _last_seen(mine),
        "provider_records": [e.external_id or str(e.id) for e in effects],
        "attempts": final.attempts,
        "events": sorted(set(cited)),
    }


def _action(write: Arrival | None) -> str:
    if write is None:
        return "no write reached a provider"
    return f"{write.method} {write.path} at {write.provider}"


def _no_error(write: Arrival | None) -> str:
    """What stands in for the error when the target recorded none."""
    if write is None:
        return "none recorded by the target"
    return f"none recorded by the target; the provider answered the last write: {_answer(write)}"


def _answer(a: Arrival | None) -> str | None:
    """What the provider answered a request, as the worker saw it."""
    if a is None:
        return None
    if a.status is None:
        return "no response (the connection was dropped or timed out)"
    return f"HTTP {a.status}"


def _last_seen(arrivals: Sequence[Arrival]) -> str:
    """The last thing a provider told the worker about the job."""
    if not arrivals:
        return "never reached a provider"
    last = arrivals[-1]
    what = "lookup" if last.kind == "lookup" else "write"
    answer = _answer(last)
    if last.kind == "lookup" and last.status == 501:
        answer = "HTTP 501: the provider cannot look it up"
    elif last.kind == "write" and last.replayed:
        answer = f"{answer}, replayed under the key"
    return f"last {what} at {last.provider}: {answer}"


def _wall(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="milliseconds")
