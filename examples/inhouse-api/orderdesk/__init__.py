"""An order job on RQ: create the order at the team's own orders service, once.

The worker is the RQ example's (``examples/rq-worker``: the record, the lease, deliveries
on RQ, reconcile before retry), run as ``worker.py --client orderdesk``; this package is
what it takes from here: the orders service's client (``providers.py``), the one call a
job makes, and how its request id is made.
"""

from __future__ import annotations

import uuid

from rqbilling.client import Client

from orderdesk.providers import Calls


def request_id(provider: str, job_id: str, bugs: frozenset[str]) -> str:
    """The ``meta.request_id`` the service dedupes on: from the job, never the attempt."""
    if "fresh-key" in bugs:
        # BUG fresh-key: a new request id per attempt, so the service sees every retry
        # as a new order.
        return f"{provider}-{job_id}-{uuid.uuid4().hex[:12]}"
    return f"{provider}-{job_id}"


CLIENT = Client(
    calls=Calls,
    plan=("orders",),
    kinds={"orders": "idempotent"},
    bugs=("fresh-key",),
    key=request_id,
)
