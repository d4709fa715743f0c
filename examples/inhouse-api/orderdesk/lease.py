"""The lease on one claimed job, renewed in the background while the job runs.

A thread renews every third of the TTL on its own connection, so a slow call keeps the
job; a stopped (SIGSTOP) or killed process cannot renew, and its lease runs out for
another worker to take over. Before calling out, the job renews once more in its own
thread: a worker that lost the job stops there, before any write.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from types import TracebackType

from orderdesk.record import Claim, Record

#: Call out only with this share of the TTL left (a renewal that itself took most of
#: the lease is too late to rely on).
MARGIN = 0.25


class LeaseLost(Exception):
    pass


class LeaseKeeper:
    def __init__(self, record: Record, claim: Claim, ttl_s: float) -> None:
        self.record = record
        self.claim = claim
        self.ttl_s = ttl_s
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        record = Record(self.record.path)
        try:
            while not self._stop.wait(self.ttl_s / 3):
                try:
                    expires = record.renew(self.claim, self.ttl_s)
                except sqlite3.Error:
                    continue  # busy for longer than the timeout: try again next time
                if expires is None:
                    self.lost.set()
                    return
        finally:
            record.close()

    def ensure(self, step: str) -> None:
        """Raise LeaseLost unless the lease is ours, renewed, with a margin left."""
        if self.lost.is_set():
            raise LeaseLost(f"{self.claim.job_id}: lease lost before {step}")
        expires = self.record.renew(self.claim, self.ttl_s)
        if expires is None or expires - time.time() < MARGIN * self.ttl_s:
            self.lost.set()
            raise LeaseLost(f"{self.claim.job_id}: lease lost before {step}")
