"""Keeping a lease alive while one attempt runs, and knowing when it was lost.

A background thread renews every third of the TTL on its own ledger connection, so a
slow provider call does not let the lease lapse under a live worker. Renewal is a
compare-and-set on owner and token: once another claim has bumped the token, or the lease
ran out before we renewed it, the lease is gone for good and the attempt must stop.
"""

from __future__ import annotations

import threading
import time

from scenarios.ledger import Claimed, LedgerStore


class LeaseKeeper:
    def __init__(
        self, ledger: LedgerStore, claim: Claimed, *, ttl_s: float, check_owner: bool
    ) -> None:
        self._ledger = ledger
        self._claim = claim
        self._ttl_s = ttl_s
        self._check_owner = check_owner
        self.expires_at = claim.lease_expires_at
        #: The lease's end by this worker's own wall clock, as of the last renewal: only
        #: the ``lease_by_worker_clock`` mutant reads it (the ledger's clock decides).
        self.wall_expires_at = time.time() + (claim.lease_expires_at - time.monotonic())
        self.lost = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-renewal", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def renew(self, ledger: LedgerStore | None = None) -> bool:
        """Renew now (on ``ledger``, default the keeper's own connection)."""
        expires = (ledger or self._ledger).renew(
            self._claim, now=time.monotonic(), ttl_s=self._ttl_s, check_owner=self._check_owner
        )
        if expires is None:
            self.lost.set()
            return False
        self.expires_at = max(self.expires_at, expires)
        self.wall_expires_at = time.time() + (self.expires_at - time.monotonic())
        return True

    def _run(self) -> None:
        while not self._done.wait(self._ttl_s / 3):
            try:
                if not self.renew():
                    return
            except Exception:  # a ledger link fault: keep trying until the lease runs out
                if time.monotonic() >= self.expires_at:
                    self.lost.set()
                    return
