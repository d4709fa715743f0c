"""``duplicate_delivery`` at a target with one queue: the same job enqueued again while
its first attempt's request is held at the provider (any queue's at-least-once
redelivery), played in rounds on fresh jobs until the redelivery meets that attempt in
flight.

Every bound here is the target's own or the harness's, never the reference worker's:
the hold is released within half the target's lease, a take-up is waited for by the
harness's floor plus the target's declared polls (``[target] poll_s``), stretched by the
time the workers waited for a CPU (:mod:`harness.cpu_wait`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fake_providers import Fault
from harness.contract.errors import Inconclusive
from harness.cpu_wait import CpuWait
from harness.drivers.delivery_words import not_taken_up, refused, unseen
from harness.drivers.lease import lease_began
from harness.drivers.review import NONE
from harness.rendezvous import Hit
from harness.trial import Trial

#: The held first attempt is released by this share of the lease after that attempt took
#: its lease (:func:`harness.drivers.lease.lease_began`), so the first worker still owns
#: its job (DESIGN "Fairness": no recovery races a ghost).
RELEASE_WITHIN_LEASES = 0.5
#: How long after the release a redelivery may still be taken up by a worker: the
#: harness's own floor, for the latency of the machine, the failpoint socket and a worker
#: that polls often, ...
CONSUME_AFTER_S = 3.0
#: ... plus this many of the target's declared polls (``[target] poll_s``): a worker may
#: have looked at its queue just before the redelivery landed and sleep a whole poll, and
#: the one free to take it may first finish the job it holds and sleep once more.
CONSUME_POLLS = 2
#: How often the cell is played on a fresh job when the redelivery's enqueue command
#: landed outside the first attempt (after it ended, or before it began): a queue may
#: rightly drop a delivery of a job that already ended, so such a round proves nothing.
ROUNDS = 3
#: From the second round on, the redelivery's enqueue command starts this share of the
#: lease after the first delivery's: when both commands take about as long, the second
#: lands that long after the first, so after a claim that follows the landing at once and
#: inside the half lease the first attempt's request is held for. A command slower than
#: that half lease cannot land in flight when started at the hold, as the first round does.
HEAD_START_LEASES = 0.25
#: Past the bound, how often the workers' CPU wait is read again while it still stretches it.
STARVED_LOOK_S = 0.25
#: The standard failpoint of a job just claimed (docs/failpoints.md).
CLAIMED = "after_claim"


def consume_within_s(poll_s: float | None) -> float:
    """How long after the release a redelivery may still be taken up, for a target that
    declares ``poll_s`` (None: it declares none, and the harness's floor applies)."""
    return CONSUME_AFTER_S + CONSUME_POLLS * (poll_s or 0.0)


def enqueued_again(trial: Trial) -> frozenset[str]:
    """The same job (id and payload) enqueued again while the first attempt's request is
    held at the provider, with a second worker free to take it.

    The cell is reached when the second delivery was consumed: the enqueue command
    exited 0 and, for a worker that speaks failpoints, a worker reached a failpoint for
    the job after it, or a second write for it reached the provider. Whether that worker
    sends is its business: one that waits for the first attempt instead is right to.
    Fairness: the held request is released before the first worker's lease can expire,
    whatever the second worker did, so the first attempt stays the first worker's. The
    lease is counted from when that attempt took it, not from the hold, and the enqueue
    command runs beside the hold: a slow command must not keep the request frozen past
    the lease. A command slower than that half lease may land only after the first
    attempt ended, and a queue may drop a delivery of a job that ended: that round is
    played again on a fresh job, with the redelivery's command started beside the first
    delivery's (:data:`ROUNDS`, :data:`HEAD_START_LEASES`).
    """
    job = trial.enqueue_batch()
    fault_id = trial.arm(_first_attempt_held(trial, job))
    trial.start_worker()
    trial.start_worker()  # free (or done with the other jobs) when the redelivery comes
    missed: list[_Round] = []
    while True:
        played = _Round(trial, job)
        if len(missed) == 0:
            played.held_then_redelivered(fault_id)
        else:
            played.redelivered_beside(fault_id)
        if played.taken_up():
            return NONE
        missed.append(played)
        if len(missed) == ROUNDS:
            raise Inconclusive(_never_in_flight(trial, missed))
        job = trial.next_job_id()
        fault_id = trial.arm(_first_attempt_held(trial, job))


def _first_attempt_held(trial: Trial, job: str) -> Fault:
    """The hold of the first attempt's request, let go by the provider itself half a
    lease after it began at the latest: the release the claim is read for comes later on
    a loaded machine (over a second at load 27), and a request frozen past the worker's
    own HTTP timeout, then committed after it looked the job up and found nothing, races
    it with a ghost no protocol at a plain provider can see (DESIGN "Fairness")."""
    return Fault(
        "hold_before_commit",
        job=job,
        release_after_s=trial.config.lease_ttl_s * RELEASE_WITHIN_LEASES,
        release_outcome="commit",
    )


class _Round:
    """One redelivery of ``job`` meeting its first attempt, held at the provider."""

    def __init__(self, trial: Trial, job: str) -> None:
        assert trial.rendezvous is not None
        self.trial = trial
        self.job = job
        self.window = _Window(job, busy=None)
        self.speaks = False
        self.redelivery: _Enqueue | None = None
        #: When the first attempt took its lease (its claim, as far as the history shows).
        self.began = 0.0

    def held_then_redelivered(self, fault_id: str) -> None:
        """The first round: the job is already queued; its redelivery starts at the hold."""
        held = self._held(fault_id)
        self.window.opened = time.monotonic()
        self.redelivery = _Enqueue(self.trial, self.job)  # first: the lease is already running
        self._release(fault_id, held)

    def redelivered_beside(self, fault_id: str) -> None:
        """A later round: the job is new, and its redelivery's command starts a share of
        the lease after its first delivery's, to land in flight though it is slow."""
        trial = self.trial
        self.window.opened = time.monotonic()
        head_start = trial.config.lease_ttl_s * HEAD_START_LEASES
        self.redelivery = _Enqueue(trial, self.job, after_s=head_start)
        try:
            trial.enqueue(self.job)
        except BaseException:
            self.redelivery.join()
            raise
        self._release(fault_id, self._held(fault_id))

    def _held(self, fault_id: str) -> Any:
        trial = self.trial
        assert trial.rendezvous is not None
        try:
            held = trial.wait_held(fault_id, what=f"first delivery's request for {self.job}")
        except BaseException:
            if self.redelivery is not None:
                self.redelivery.join()  # no enqueue outlives its trial
            raise
        before = [h for h in trial.rendezvous.hits() if h.job == self.job and h.t <= held.t_mono]
        self.speaks = bool(before)
        self.window.held = held.t_mono
        # The worker whose request is held goes on with its attempt after the release: its
        # later failpoints are that attempt's, not the redelivery's. The last to reach a
        # failpoint for the job, until the request names its sender (after the release:
        # nothing may delay it).
        self.window.busy = before[-1].source if before else None
        return held

    def _name_sender(self, held: Any) -> None:
        """The held request's sender, where the worker says who it is."""
        trial = self.trial
        sender = [
            e.fields.get("worker_id")
            for e in trial.writes(self.job)
            if e.fields.get("id") == held.arrival_id
        ]
        if sender and sender[0] in trial.workers:
            self.window.busy = f"worker:{sender[0]}"

    def _release(self, fault_id: str, held: Any) -> None:
        trial = self.trial
        assert self.redelivery is not None
        trial.reached, trial.reached_by = False, None
        try:
            budget = trial.config.lease_ttl_s * RELEASE_WITHIN_LEASES
            # From what the history holds already (failpoints, enqueues): a lease can have
            # begun no earlier. Past its half lease, the release goes at once: a read of the
            # ledger first would only keep the request frozen longer on a loaded machine.
            self.began = lease_began(trial.history.events(), self.job, held.t_mono)
            if time.monotonic() < self.began + budget:
                trial.observer.drain()  # the claims a target's ledger reports
                self.began = lease_began(trial.history.events(), self.job, held.t_mono)
            # A take-up counts from the first attempt's claim on: before it, the job was
            # not yet in flight.
            self.window.opened = max(self.window.opened, self.began)
            # The provider lets the request go by the deadline itself: the reads below
            # take a while on a loaded machine and must not keep it frozen past it. Set
            # once the claim is read (the deadline counts from it, and the earlier one
            # wins at the provider, so a guess from before the read would stick).
            release_by = self.began + budget
            trial.release(fault_id, "commit", by=release_by)
            _hold_until(trial, self.job, release_by)
            # Let go now, or at the deadline already if this comes later (a harmless call).
            self.window.released = min(time.monotonic(), release_by)
            trial.release(fault_id, "commit")
            if self.redelivery.running():
                trial.history.append(
                    "supervisor",
                    "note",
                    job=self.job,
                    text=f"the held request for {self.job} was released while the "
                    "redelivery's enqueue command still ran: the first attempt's lease "
                    "allowed no longer",
                )
        finally:
            self.redelivery.join()  # no enqueue outlives its trial
        self.redelivery.check()  # a failing enqueue is the configuration's error, not a verdict
        self._name_sender(held)

    def landed_in_flight(self) -> bool:
        """The redelivery's command exited while the first attempt's request was held: its
        delivery was in the queue while that attempt was in flight."""
        assert self.redelivery is not None
        return self.began < self.redelivery.exited_at <= self.window.released

    def taken_up(self) -> bool:
        """Wait for a worker to take the redelivery up; True once the round is decided:
        one did, the queue refused the duplicate, or none did though it landed in flight
        (then the cell was not exercised, and says so). False when none did and the
        delivery may have landed outside the first attempt."""
        trial = self.trial
        assert trial.target is not None
        assert self.redelivery is not None
        if self.redelivery.refused:
            if not self.landed_in_flight():
                return False  # refused as a job that ended (or not yet begun): again
            # A queue that deduplicates a job it holds in flight protects it: the same
            # word for every target, and no gap (--strict passes it).
            trial.reached, trial.reached_by, trial.exercised = True, None, refused(self.job)
            return True
        if trial.refused(self.job):
            # The first delivery's own command was refused: on a starved machine the
            # redelivery's, started later, delivered first, and the job ended before the
            # other landed. No delivery met an attempt in flight: again.
            return False
        within = consume_within_s(trial.target.poll_s)
        start = time.monotonic()
        deadline = start + within
        # The workers (and the harness, which hears their failpoints) may be starved of
        # CPU: the time they waited for one does not count against them, up to the
        # trial's own bound.
        starved = CpuWait(lambda: _processes(trial))
        consumed, how = _consumed(trial, self.window, speaks=self.speaks)
        while not consumed:
            if time.monotonic() >= deadline:
                waited = min(starved.waited_s(), trial.config.quiescence_timeout_s)
                now = time.monotonic()
                if now < start + within + waited:
                    # Looked at again a while later: each look reads every worker's tasks.
                    deadline = max(start + within + waited, now + STARVED_LOOK_S)
                    continue
                if not self.landed_in_flight():
                    return False
                trial.reached, trial.reached_by = False, None
                trial.exercised = not_taken_up(self.job, deadline - start)
                return True
            trial.sleep(0.02)
            consumed, how = _consumed(trial, self.window, speaks=self.speaks)
        trial.reached, trial.reached_by = True, how
        if how is None:
            trial.exercised = unseen(self.job)
        return True


def _processes(trial: Trial) -> list[int]:
    """The harness's own pid and every live worker's, its children's included."""
    return [os.getpid(), *trial.worker_pids()]


def _hold_until(
    trial: Trial, job: str, release_by: float, *, clock: Callable[[], float] = time.monotonic
) -> None:
    """Keep ``job``'s request held until ``release_by``, or until a second write for it
    reached the provider. Reading the writes brings in the providers' logs, which takes a
    while on a loaded machine: it is read only while that much time is left, so that the
    harness's release (and its record of when the hold ended) comes on time. The provider
    lets go at ``release_by`` by itself either way, so no read can make a ghost."""
    read_s = 0.0
    while True:
        left = release_by - clock()
        if left <= 0:
            return
        if left <= 2 * read_s:
            trial.sleep(left)
            return
        t0 = clock()
        if len(trial.writes(job)) >= 2:
            return
        read_s = max(read_s, clock() - t0)
        trial.sleep(min(0.02, max(0.0, release_by - clock())))


def _never_in_flight(trial: Trial, rounds: list[_Round]) -> str:
    """Why no round's redelivery met its first attempt in flight."""
    last = rounds[-1]
    assert last.redelivery is not None
    hold_s = trial.config.lease_ttl_s * RELEASE_WITHIN_LEASES
    jobs = ", ".join(r.job for r in rounds)
    return (
        f"the second delivery of {jobs} was never in the queue while the first attempt "
        f"was in flight: the target's enqueue command took {last.redelivery.took_s:.2f} s "
        f"at the last, and a first attempt's request may be held for only half its lease "
        f"({hold_s:g} s) after its claim; a delivery that lands after the job ended, or "
        "before it was claimed, may rightly be dropped, so the cell was not reached "
        "(a faster enqueue command, or a longer lease, reaches it on this machine; a "
        "worker that looks at its queue less often than every "
        f"{consume_within_s(None):g} s declares its [target] poll_s)"
    )


class _Enqueue:
    """``trial.deliver(job)`` in a thread of its own, ``after_s`` from now, its error kept
    for :meth:`check`; :attr:`exited_at` is when its command exited, :attr:`refused`
    whether the queue refused this delivery as a job it already holds."""

    def __init__(self, trial: Trial, job: str, *, after_s: float = 0.0) -> None:
        self._error: BaseException | None = None
        self.exited_at = float("inf")
        self.took_s = 0.0
        self.refused = False
        at = time.monotonic() + after_s

        def run() -> None:
            try:
                if after_s > 0 and trial.abort.wait(max(0.0, at - time.monotonic())):
                    raise Inconclusive("interrupted")
                started = time.monotonic()
                self.refused = trial.deliver(job)
                self.exited_at = time.monotonic()
                self.took_s = self.exited_at - started
            except BaseException as exc:  # raised again by check, in the driver's thread
                self._error = exc

        self._thread = threading.Thread(target=run, name=f"enqueue {job}", daemon=True)
        self._thread.start()

    def running(self) -> bool:
        return self._thread.is_alive()

    def join(self) -> None:
        # The enqueue command bounds itself (targets/command.py ENQUEUE_TIMEOUT_S).
        self._thread.join()

    def check(self) -> None:
        if self._error is not None:
            raise self._error


@dataclass
class _Window:
    """When the redelivery of ``job`` could first be taken up (its command started, and
    the first attempt had claimed the job), when that attempt's request was held and let
    go, and the lane of the worker whose request was held."""

    job: str
    busy: str | None
    opened: float = 0.0
    released: float = float("inf")
    held: float = 0.0

    def takes_up(self, hit: Hit, lanes: set[str]) -> bool:
        """``hit`` is a worker taking up the redelivery: another worker's, for the job;
        the held worker's own only while its request was frozen at the provider (any
        failpoint then is another take-up), or, after the release, a claim (its attempt
        is past its claim, so a claim is a new take-up: when the enqueue command outlasts
        the hold, the first worker may well be the one free to take the redelivery).
        Before the hold, the held worker's failpoints are its own attempt's."""
        if hit.job != self.job or hit.source not in lanes or hit.t <= self.opened:
            return False
        if hit.source != self.busy:
            return True
        return self.held < hit.t < self.released or hit.point == CLAIMED


def _consumed(trial: Trial, window: _Window, *, speaks: bool) -> tuple[bool, str | None]:
    """Whether the redelivery is known to be consumed, and how: at a failpoint, at the
    provider (a second write), or (None) by the enqueue alone, which is all a worker
    without failpoints can show."""
    assert trial.rendezvous is not None
    lanes = {f"worker:{name}" for name in trial.workers}
    if any(window.takes_up(h, lanes) for h in trial.rendezvous.hits()):
        return True, "failpoint"
    if len(trial.writes(window.job)) >= 2:
        return True, "provider"
    return not speaks, None
