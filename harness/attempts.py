"""Which workers are inside an attempt, read from the trial's history.

A trial is over when every job has ended and nothing is still acting on one. "Still
acting" is read from events, not waited out: a worker's ledger ``claim`` opens an
attempt, and the attempt is over once that worker reached ``after_local_write`` for it
(the boundary after its outcome reached the ledger), had a result write for it rejected
(it lost the job), or lost its lease (``lease_expired``, from its log), or exited. An
attempt with none of those is open, and the trial gives it the settle pause.

Only a target whose ledger gives claims as events can be read this way; for any other
the trial cannot tell and waits the settle pause in full (:meth:`Trial.wait_quiescent`).
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.history import Event

#: The boundary a worker reaches once its attempt's outcome is in the ledger.
LAST_BOUNDARY = "after_local_write"


def open_attempts(events: Iterable[Event], alive: Iterable[str]) -> set[tuple[str, str, int]]:
    """``(worker, job, attempt)`` of every claim by a live worker not known to be over."""
    lanes = {f"worker:{name}" for name in alive}
    latest: dict[str, tuple[float, str, int]] = {}
    ended: set[tuple[str, str | None, int | None]] = set()
    lost_at: dict[str, float] = {}
    for e in events:
        if e.source not in lanes:
            continue
        if e.kind == "claim" and e.job is not None and e.attempt is not None:
            if e.source not in latest or e.t >= latest[e.source][0]:
                latest[e.source] = (e.t, e.job, e.attempt)
        elif (e.kind == "failpoint" and e.fields.get("point") == LAST_BOUNDARY) or (
            e.kind == "result_write" and e.fields.get("accepted") is False
        ):
            ended.add((e.source, e.job, e.attempt))
        elif e.kind == "lease_expired":
            lost_at[e.source] = max(lost_at.get(e.source, e.t), e.t)
    out: set[tuple[str, str, int]] = set()
    for lane, (t, job, attempt) in latest.items():
        if (lane, job, attempt) in ended or lost_at.get(lane, float("-inf")) >= t:
            continue
        out.add((lane.removeprefix("worker:"), job, attempt))
    return out


def reports_claims(events: Iterable[Event]) -> bool:
    """Whether the target's ledger gives claims as events (so attempts can be read)."""
    return any(e.kind == "claim" and e.source.startswith("worker:") for e in events)
