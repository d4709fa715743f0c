"""Quiescence: the wait until every job has ended and nothing still acts on one, and
the waits drivers measure by leases and attempts."""

from __future__ import annotations

import time

from harness.attempts import open_attempts, reports_claims
from harness.cpu_wait import CpuWait
from harness.targets.base import LeaseClock
from harness.trial.state import TrialState

#: Between two reads of the jobs' states while waiting for quiescence: a job's end is
#: a row in the target's ledger, which no one announces, so it is polled; a read costs a
#: fraction of a millisecond, and a trial ends at most this much after its last job.
QUIESCENCE_POLL_S = 0.02


class Quiescence(TrialState):
    """Waits on the trial's progress."""

    def wait_lease_out(self, job: str, *, leases: float) -> None:
        """Wait until ``job``'s lease has run out under a stopped owner.

        A target whose ledger tells the expiry (:class:`LeaseClock`) is waited on to that
        moment, read after the owner stopped (a stopped owner renews no more). Any other
        is given ``leases`` of its own lease: its clock and rounding are its own, so the
        margin is part of the wait.
        """
        assert self.target is not None
        if not isinstance(self.target, LeaseClock):
            self.sleep(self.config.lease_ttl_s * leases)
            return
        expires = self.target.lease_expires_at(job)
        if expires is not None:
            self.sleep(max(0.0, expires - time.monotonic()))

    def wait_quiescent(self, *, timeout_s: float | None = None) -> bool:
        """Poll until every job has ended at every consumer and nothing still acts on one.

        "Nothing acts" is read from the history where the target's ledger gives claims:
        no live worker is inside an attempt (:mod:`harness.attempts`), so the trial ends
        the moment the last one is over. Where that cannot be read (no claims as events,
        a second consumer's ledger, an attempt still open), the settle pause
        (``TrialConfig.settle_s``, the harness's own bound for every target) lets a
        straggler (a thawed owner, a late recovery) act; if it reopens a job, polling
        goes on until the bound.
        """
        bound = timeout_s or self.config.quiescence_timeout_s
        deadline = time.monotonic() + bound
        #: Read once the bound has passed: then the bound may have measured a machine
        #: whose workers (or served commands) waited for a CPU most of it (a runtime or an
        #: SDK to load at each start), and it is stretched by that wait, at most by itself
        #: (harness.reach).
        starved: CpuWait | None = None
        end = deadline
        with self.phases.timed("quiescence"):
            while True:
                now = time.monotonic()
                if now >= deadline:
                    if starved is None:
                        starved = CpuWait(self.target_pids, from_birth=True)
                    end = deadline + min(starved.waited_s(), bound)
                    if now >= end or self.abort.is_set():
                        break
                if self._all_quiescent():
                    if self.nothing_in_flight():
                        self.quiet_deadline = None
                        return True
                    # A deliberate wait: nothing tells when a straggler is done.
                    self._pause(self.config.settle_s)
                    if self._all_quiescent():
                        self.quiet_deadline = None
                        return True
                    continue
                # The poll interval: the ledger (or a status command, itself paced) tells
                # no one when a job ends, so it is read again; each read is overhead.
                self._pause(QUIESCENCE_POLL_S)
            self.quiet_deadline = end
            return False

    def nothing_in_flight(self) -> bool:
        """True when the history shows that no live worker is inside an attempt; False
        when one is, or when the target's events cannot show it."""
        if self.consumers:
            return False  # a second consumer's ledger is not read as events
        self.observer.drain()
        events = self.history.events()
        if not reports_claims(events):
            return False
        # A stopped worker cannot act until it is resumed, and the driver waits then.
        alive = [
            name
            for name, h in self.workers.items()
            if h.exited_at is None and name not in self.paused
        ]
        return not open_attempts(events, alive)

    def wait_attempts_over(self, bound_s: float) -> None:
        """Wait until no live worker is inside an attempt, at most ``bound_s``: the
        whole bound where the history cannot show it."""
        deadline = time.monotonic() + bound_s
        while time.monotonic() < deadline and not self.nothing_in_flight():
            self._pause(min(QUIESCENCE_POLL_S, max(0.0, deadline - time.monotonic())))

    def _all_quiescent(self) -> bool:
        assert self.target is not None
        others = all(t.quiescent(jobs) for t, jobs in self.consumers)
        return others and self.target.quiescent(self.jobs)
