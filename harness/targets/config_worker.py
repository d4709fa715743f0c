"""How a target's workers run: how many, their lease, SIGTERM grace and poll, and their
cap on writes per job (``[target] workers``, ``lease_ttl_s``, ``term_grace_s``,
``poll_s``, ``max_attempts``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.targets.config_reader import TableReader

MAX_WORKERS = 64
LEASE_RANGE_S = (0.05, 600.0)
TERM_GRACE_RANGE_S = (0.05, 600.0)
#: The trial's bound (``TrialConfig.quiescence_timeout_s``, 20 s) leaves room for a
#: couple of polls: a worker that looks for work less often cannot end a trial within it.
POLL_RANGE_S = (0.001, 10.0)


class WorkerSchema(TableReader):
    """The workers' part of ``[target]``: their number, timings and attempt cap."""

    def worker_count(self, target: Mapping[str, Any]) -> int:
        workers = self.integer(target, "target.", "workers", default=1)
        if not 1 <= workers <= MAX_WORKERS:
            raise self.fail(
                "target.workers",
                f"must be from 1 to {MAX_WORKERS}, got {workers}",
                "write workers = 2",
            )
        return workers

    def timings(self, target: Mapping[str, Any]) -> tuple[float | None, float | None, float | None]:
        """``lease_ttl_s``, ``term_grace_s`` and ``poll_s``, each None when left out."""
        lease = self.seconds(
            target,
            "lease_ttl_s",
            LEASE_RANGE_S,
            "write the lease your worker uses, for example lease_ttl_s = 1.0",
        )
        term_grace = self.seconds(
            target,
            "term_grace_s",
            TERM_GRACE_RANGE_S,
            "write how long your worker needs to stop on SIGTERM, for example "
            "term_grace_s = 2.0, or leave it out for two leases",
        )
        poll = self.seconds(
            target,
            "poll_s",
            POLL_RANGE_S,
            "write the longest your worker sleeps between looks at its queue, for "
            "example poll_s = 0.5, or leave it out",
        )
        return lease, term_grace, poll

    def attempt_cap(self, target: Mapping[str, Any]) -> int | None:
        """``max_attempts``: the worker's cap on writes per job, None when it has none."""
        if "max_attempts" not in target:
            return None
        max_attempts = self.integer(target, "target.", "max_attempts", default=0)
        if max_attempts < 1:
            raise self.fail(
                "target.max_attempts",
                f"must be at least 1, got {max_attempts}",
                "write the worker's cap on writes per job, or leave the key out when it has none",
            )
        return max_attempts
