"""When a held attempt's lease began, as far as the history shows, and so when a hold
must end for the attempt still to own its job (DESIGN "Fairness").

A worker's lease starts when it takes the job, not when its request reaches the
provider: under load, claim -> request can take a large share of the lease. Counting a
release from the hold would let the harness itself run the lease out and hand the job
to a peer while the request is frozen, a ghost no correct protocol can recover from at a
plain provider.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.contract.vocabulary import EventKind
from harness.history import Event


def lease_began(events: Iterable[Event], job: str, held_at: float) -> float:
    """The earliest time the attempt held at ``held_at`` can have taken its lease on
    ``job``: its claim, where the target reports claims (the last one before the hold:
    the one that owns the attempt); else the first failpoint a worker reached for the
    job; else the job's first enqueue; else the hold itself.

    Renewals only move a lease's end later, so a deadline counted from here is safe for
    a worker that renews and for one that does not.
    """
    before = [e for e in events if e.job == job and e.t <= held_at]
    claims = [e.t for e in before if e.kind == EventKind.CLAIM]
    if claims:
        return max(claims)
    for kind in (EventKind.FAILPOINT, EventKind.ENQUEUE):
        times = [e.t for e in before if e.kind == kind]
        if times:
            return min(times)
    return held_at
