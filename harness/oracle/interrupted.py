"""Attempts the harness cut short, read from the trial's history.

``max_attempts`` is the worker's cap on writes per job (docs/fairness.md), and the
``attempts`` a target reports is its own count, which many workers keep per claim
(every example here does). A claim that a kill or a stop ended before the worker was
done with it, after which the job was claimed again, is a retry the harness forced, not
one the worker chose: a write-capped worker rightly tries again, as often as it is cut
short. ``bounded_retries`` allows those on top of the cap, so a correct worker killed
more times than its cap is not a false alarm, while one that retries past its cap on its
own (no fault between) is still caught.

An attempt is read from a worker's own events that name a job and an attempt (its
failpoints, its ledger's claims); a worker that reports neither has nothing to read,
and nothing is allowed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from harness.attempts import LAST_BOUNDARY
from harness.history import Event

#: The signals that end an attempt or stop it long enough for its lease to run out.
CUTTING = frozenset({"SIGKILL", "SIGTERM", "SIGSTOP"})


def cut_short(events: Iterable[Event]) -> Counter[str]:
    """Job -> how many of its attempts a signal cut short before the job was attempted
    again (a later attempt number of the same job)."""
    latest: dict[str, tuple[str, int, bool]] = {}
    cut: set[tuple[str, int]] = set()
    highest: dict[str, int] = {}
    for e in events:
        job, attempt = e.job, e.attempt
        # One pass over every event of the trial: the cheapest tests first.
        if (
            job is not None
            and isinstance(attempt, int)
            and attempt >= 1
            and e.source.startswith("worker:")
        ):
            if highest.get(job, 0) < attempt:
                highest[job] = attempt
            kind = e.kind
            if kind == "failpoint" or kind == "claim":
                over = kind == "failpoint" and e.fields.get("point") == LAST_BOUNDARY
                latest[e.source] = (job, attempt, over)
            elif kind == "result_write" and e.fields.get("accepted") is False:
                latest[e.source] = (job, attempt, True)
        elif e.kind == "signal" and e.fields.get("signal") in CUTTING:
            held = latest.get(f"worker:{e.fields.get('worker')}")
            if held is not None and not held[2]:
                cut.add((held[0], held[1]))
    return Counter(job for job, attempt in cut if highest.get(job, 0) > attempt)
