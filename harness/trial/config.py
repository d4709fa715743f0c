"""A run's trial settings: timing and infrastructure every trial of the run shares
(made once per run by :func:`harness.infra.trial_settings`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: A worker that finishes its attempt on SIGTERM gets the time its own lease allows.
TERM_GRACE_LEASES = 2.0


@dataclass(frozen=True)
class TrialConfig:
    """Timing and infrastructure shared by every trial of a run.

    The lease is the target's (a command target declares it); limits such as the retry
    cap are the target's own and come from it, never from here (docs/fairness.md).
    """

    lease_ttl_s: float = 0.6
    http_timeout_s: float = 0.6
    jobs_per_trial: int = 2
    quiescence_timeout_s: float = 20.0
    #: How long a resumed or recovering worker gets to act before the end state is read.
    settle_s: float = 0.25
    pg_dsn: str | None = None
    keep_dirs: bool = False
    #: Where the state directory of each trial that did not hold is kept (``--keep-state``:
    #: ``<out>/state``); None: removed with its trial, as every held one is.
    keep_state_in: Path | None = None
    workdir: Path | None = None
    #: How long a worker sent SIGTERM gets to exit before SIGKILL: ``[target]
    #: term_grace_s``; None: two leases (docs/fairness.md).
    term_grace_s: float | None = None

    @property
    def term_grace(self) -> float:
        """The SIGTERM grace in seconds, declared or by default two leases."""
        if self.term_grace_s is not None:
            return self.term_grace_s
        return TERM_GRACE_LEASES * self.lease_ttl_s

    @classmethod
    def for_target(
        cls,
        lease_ttl_s: float | None,
        pg_dsn: str | None,
        *,
        backend: str = "process",
        term_grace_s: float | None = None,
    ) -> TrialConfig:
        """The settings every command gives a trial: ``lease_ttl_s`` is the target's (a
        command target always declares one); None is the reference worker's own on
        ``backend`` (docs/fairness.md). ``term_grace_s``: the target's; None: two leases."""
        from harness.targets.reference import reference_lease_s

        lease = lease_ttl_s or reference_lease_s(backend)
        return cls(
            lease_ttl_s=lease,
            http_timeout_s=max(0.3, lease),
            pg_dsn=pg_dsn,
            term_grace_s=term_grace_s,
        )
