"""Resolving an unknown attempt by reading the provider, never by writing to it.

The lookup goes by idempotency key (idempotent providers) or by client marker (plain
ones). ``unavailable`` keeps the job unknown and tries again with backoff, under the same
lease, so no write can slip in between; the other outcomes are returned to the attempt.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from harness.contract.failpoint import failpoint
from scenarios.ledger import Claimed, LedgerStore
from scenarios.worker.calls import Lookup, ProviderCalls
from scenarios.worker.config import ProviderSpec

#: Longest pause between two lookups of one unknown job.
MAX_RECONCILE_DELAY_S = 1.0


def reconcile(
    c: Claimed,
    *,
    spec: ProviderSpec,
    key: str,
    marker: str,
    ledger: LedgerStore,
    calls: ProviderCalls,
    backoff_s: float,
    stopping: threading.Event,
    lease_lost: threading.Event,
    lookup_error_is_not_found: bool,
    on_lookup: Callable[[Lookup], None] | None = None,
    step: str | None = None,
    identity: str | None = None,
) -> Lookup | None:
    """Look the job up until the answer is not ``unavailable``; None if we must stop."""
    tries = 0
    while not stopping.is_set() and not lease_lost.is_set():
        failpoint("before_reconcile", c.job_id, c.attempt, step)
        found = calls.lookup(
            spec, job_id=c.job_id, key=key, marker=marker, token=c.token, identity=identity
        )
        failpoint("after_reconcile", c.job_id, c.attempt, step)
        unanswered = found.outcome == "unavailable" and found.reason != "in_flight"
        if unanswered and lookup_error_is_not_found:
            # MUTANT lookup_error_is_not_found: a provider that could not answer is taken
            # to have answered "nothing there".
            found = Lookup("not_found", found.reason)
        delay = min(backoff_s * 2.0**tries, MAX_RECONCILE_DELAY_S)
        now = time.monotonic()
        ledger.record_reconcile(c, found.outcome, now=now, next_at=now + delay)
        if on_lookup is not None:
            on_lookup(found)
        if found.outcome != "unavailable":
            return found
        tries += 1
        stopping.wait(delay)
    return None
