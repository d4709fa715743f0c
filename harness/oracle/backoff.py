"""``min_backoff``: a worker that declares a least backoff leaves at least that long
between a refused write of a job and its next write (issue 34, "retry storms": a cap
bounds how many retries there are, never how fast they come).

Judged from the providers' arrivals, the ground truth: the time between the moments a
provider saw two writes of one job, the first of them refused (a 5xx before anything
was committed, the failure a backoff is for). A write whose outcome was unknown, or one
answered 409 or 4xx, is left out: what follows those is reconciliation, judged by other
invariants. Each consumer of a job delivered twice, and each span between ledger
restores, is judged apart, as ``bounded_retries`` counts them.

Without a declaration nothing is judged: the intervals seen are said in the trial's
unjudged notes, as context, never as a violation.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator

from harness.contract.records import Arrival
from harness.oracle.evidence import Violation, violation
from harness.oracle.facts import Record, TrialFacts

NAME = "min_backoff"

#: How much shorter than the declared backoff an interval between two arrivals may be.
#: The provider stamps a write when it has read it, a little after the worker sent it; a
#: worker that counts its backoff from its own send (not from the answer) can show an
#: interval shorter by the difference of two loopback transits, and a timer may fire up
#: to a millisecond early (Node rounds setTimeout). Ten milliseconds covers both with
#: room; a worker that counts from the answer, as the reference does, never needs it.
TOLERANCE_S = 0.01

#: Statuses that refuse a write outright and ask for a later retry.
RETRYABLE_FROM = 500


def refused(write: Arrival) -> bool:
    """The provider answered a server error and committed nothing: a retry should wait."""
    return (
        not write.committed
        and write.status is not None
        and (write.status >= RETRYABLE_FROM or write.status == 429)
    )


def retry_intervals(record: Record) -> Iterator[tuple[str, str, Arrival, Arrival]]:
    """``(provider, job, refused write, next write)`` for every retry after a refusal,
    each consumer's and each restore span's writes taken apart, in time order."""
    for (provider, job), writes in record.retried:
        spans: dict[tuple[int, int], list[Arrival]] = defaultdict(list)
        for w in writes:
            spans[(record.consumer(w.worker_id), record.restores_before(w))].append(w)
        for span in spans.values():
            for earlier, later in itertools.pairwise(span):
                if refused(earlier):
                    yield provider, job, earlier, later


def min_backoff(record: Record, facts: TrialFacts) -> list[Violation]:
    """No write follows a refused write of its job sooner than the declared backoff."""
    least = facts.min_backoff_s
    if least is None:
        return []
    out = []
    for provider, job, earlier, later in retry_intervals(record):
        gap = later.t_mono - earlier.t_mono
        if gap + TOLERANCE_S < least:
            out.append(
                violation(
                    NAME,
                    job,
                    f"write #{later.id} for {job} reached {provider} {gap:.3f} s after "
                    f"write #{earlier.id} was refused (status {earlier.status}); the target "
                    f"declares min_backoff_s = {least:g}",
                    record,
                    arrivals=[earlier, later],
                )
            )
    return out


def intervals_note(record: Record, facts: TrialFacts) -> str | None:
    """For a target that declares no backoff: why nothing was judged, with the retry
    intervals seen; None when the backoff is declared (and so judged)."""
    if facts.min_backoff_s is not None:
        return None
    seen: dict[tuple[str, str], list[float]] = defaultdict(list)
    for provider, job, earlier, later in retry_intervals(record):
        seen[(provider, job)].append(later.t_mono - earlier.t_mono)
    why = "the target declares no min_backoff_s; declare [target] min_backoff_s in crashpoint.toml"
    if not seen:
        return f"no retry after a refused write was seen, and {why}"
    shown = "; ".join(
        f"{job} at {provider}: {', '.join(f'{g:.3f}' for g in gaps)} s"
        for (provider, job), gaps in sorted(seen.items())
    )
    return f"retry intervals after a refused write: {shown}. Not judged: {why}"
