"""Playing a fault schedule (:mod:`harness.schedule`) against a real trial.

The player is a driver like the table's, written in the same trial verbs: each fault is
armed when the one before it is done (a failpoint hold, a provider hold, a wait for the
jobs to end, a moment), acted on at its boundary, and noted in the history. A fault
whose boundary is never reached (the jobs ended first, or the worker never goes there)
is noted as not reached and the schedule goes on: a schedule is a plan, not a promise.

Fairness as in the table (DESIGN "Fairness"): a request held at the provider when its
worker dies is released before that worker's lease can expire; a restore restarts the
workers in recovery; a second consumer of a duplicate delivery is only sent where the
provider's key can protect it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fake_providers import Fault
from harness.backends.base import WorkerHandle
from harness.contract.errors import Inconclusive, RendezvousTimeout
from harness.drivers.review import NONE
from harness.rendezvous import Gate, Hit
from harness.schedule import FAILPOINTS, HITTER, FaultStep, Schedule
from harness.trial import Driver, Trial

#: How long a fault waits for its boundary before it counts as not reached.
REACH_S = 4.0
#: A held request is let go by this share of the lease, so its worker still owns the job.
RELEASE_WITHIN_LEASES = 0.5
#: How long a request held for a duplicate waits for the second consumer's own request.
SECOND_CONSUMER_WAIT_S = 10.0
_POLL_S = 0.05

#: A held request to let go: (fault id, arrival id, default outcome, let go by).
Release = tuple[str, int, str, float]
#: Lets the boundary go, with the outcome a held request is released with (None: default)
#: and ``late_ok``: a request held before commit may still commit past its deadline.
LetGo = Callable[..., None]


def schedule_driver(schedule: Schedule) -> Driver:
    """The driver that plays ``schedule``."""

    def play_schedule(trial: Trial) -> frozenset[str]:
        Player(trial, schedule).play()
        return NONE

    return play_schedule


@dataclass
class _At:
    """Where a fault landed: the worker that reached the boundary and the job."""

    worker: WorkerHandle | None
    job: str | None


class Player:
    def __init__(self, trial: Trial, schedule: Schedule) -> None:
        self.trial = trial
        self.schedule = schedule
        self.started_at = 0.0
        self.played = 0
        self.snapshot: object = None

    def play(self) -> None:
        trial, schedule = self.trial, self.schedule
        assert trial.target is not None
        for _ in range(schedule.jobs):
            trial.enqueue()
        if any(f.action == "restore" for f in schedule.faults):
            self.snapshot = trial.target.snapshot()
        faults = list(enumerate(schedule.faults, 1))
        # The first fault is armed before any worker runs, so its first hit is not missed.
        first = self._arm(faults[0][1]) if faults else None
        self.started_at = time.monotonic()
        for _ in range(schedule.workers):
            trial.start_worker()
        for n, step in faults:
            armed = first if n == 1 else self._arm(step)
            at = self._reach(step, armed)
            if at is None:
                self._note(n, step, "not reached")
                continue
            self._note(n, step, "reached")
            self.played += 1
            trial.reached = True
        if not any(h.alive() for h in trial.workers.values()):
            # Every worker was killed for good: one comes back, or no job could end.
            trial.start_worker()

    # -- arming and reaching -------------------------------------------------------------

    def _arm(self, step: FaultStep) -> Gate | str | None:
        trial = self.trial
        if step.at in FAILPOINTS:
            assert trial.rendezvous is not None
            return trial.rendezvous.hold(step.at, times=step.hit)
        if step.at in ("arrival", "commit", "response"):
            action = "hold_before_commit" if step.at == "arrival" else "hold_after_commit"
            return trial.arm(Fault(action, times=step.hit, **self._deadline(step)))
        if step.at == "start" and step.action == "provider_fault":
            # At start is before any worker runs: armed after them, a worker's first write
            # could pass first on a loaded machine, and the schedule play as no fault.
            self._provider_fault(step)
        return None

    def _provider_fault(self, step: FaultStep) -> None:
        fault = Fault(step.fault, times=step.times, status=step.status, delay_s=step.delay_s)
        self.trial.arm(fault)

    def _deadline(self, step: FaultStep) -> dict[str, Any]:
        """A request held before commit is let go by the provider itself, dropped, half a
        lease after the hold: the player's release may come late on a loaded machine
        (it reads the providers' logs first), and a late commit is a ghost. Dropped, as
        :meth:`_act` drops a release that comes past it. A second consumer's duplicate
        waits longer on purpose (its own ledger races no lease): no deadline there."""
        trial = self.trial
        assert trial.target is not None
        if step.at != "arrival" or (
            step.action == "duplicate" and trial.target.redelivery == "second_consumer"
        ):
            return {}
        return {
            "release_after_s": trial.config.lease_ttl_s * RELEASE_WITHIN_LEASES,
            "release_outcome": "drop",
        }

    def _reach(self, step: FaultStep, armed: Gate | str | None) -> _At | None:
        """Wait for the boundary, act there, and say where it landed (None: not reached)."""
        if isinstance(armed, Gate):
            return self._at_failpoint(step, armed)
        if step.at in ("arrival", "commit", "response"):
            assert isinstance(armed, str)
            return self._at_provider(step, armed)
        if step.at == "settled" and not self._wait(self._ended, REACH_S * 2):
            return None
        if step.at == "time":
            left = self.started_at + step.after_s - time.monotonic()
            if left > 0:
                self.trial.sleep(left)
        at = _At(self._named(step.worker), None)
        self._act(step, at, hit=None)
        return at

    def _at_failpoint(self, step: FaultStep, gate: Gate) -> _At | None:
        trial = self.trial
        assert trial.rendezvous is not None
        hits: list[Hit] = []
        deadline = time.monotonic() + REACH_S
        while len(hits) < step.hit:
            hit = self._next_hit(gate, deadline)
            if hit is None:
                trial.rendezvous.disarm(gate)
                return None
            hits.append(hit)
            if len(hits) < step.hit:
                hit.resume()
        hit = hits[-1]
        trial.reached_by = "failpoint"
        at = _At(self._worker_of(hit.source), hit.job)
        self._act(step, at, hit=hit)
        return at

    def _next_hit(self, gate: Gate, deadline: float) -> Hit | None:
        while time.monotonic() < deadline:
            if self.trial.abort.is_set():
                raise Inconclusive("interrupted")
            try:
                return gate.wait(_POLL_S * 4)
            except RendezvousTimeout:  # nobody there yet
                if self._ended():
                    return None
        return None

    def _at_provider(self, step: FaultStep, fault_id: str) -> _At | None:
        trial = self.trial
        client = trial.client
        deadline = time.monotonic() + REACH_S
        held = None
        previous = None
        for k in range(1, step.hit + 1):
            previous, held = held, None
            while held is None and time.monotonic() < deadline:
                try:
                    # The next request held: each earlier one was let go already.
                    after = 0 if previous is None else previous.arrival_id
                    held = client.wait_held_count(fault_id, 1, _POLL_S * 4, after=after)[0]
                    if held.released_by is not None:
                        # Its deadline let it go before this wait met it: the step would
                        # act past the boundary, so it waits for the next request instead.
                        previous, held = held, None
                except RendezvousTimeout:  # not held yet
                    if self._ended():
                        break
            if held is None:
                # A request held after the wait gave up is let go, and (no single-fault
                # disarm in the control API) every fault disarmed: a hold left armed would
                # catch a later request and keep it for minutes. Said in the history.
                with contextlib.suppress(Exception):
                    client.release(fault_id, "commit")
                client.disarm_all()
                trial.history.append(
                    "supervisor", "note", text="provider faults disarmed: a hold was not reached"
                )
                return None
            if k < step.hit:
                client.release(fault_id, "commit", arrival_id=held.arrival_id)
        assert held is not None
        trial.record_held(held)
        at = _At(self._writer_of(held.job_id, held.arrival_id), held.job_id)
        release_by = held.t_mono + trial.config.lease_ttl_s * RELEASE_WITHIN_LEASES
        outcome = {"arrival": "drop", "commit": "respond", "response": "drop"}[step.at]
        self._act(step, at, hit=None, release=(fault_id, held.arrival_id, outcome, release_by))
        return at

    # -- acting --------------------------------------------------------------------------

    def _act(
        self,
        step: FaultStep,
        at: _At,
        *,
        hit: Hit | None,
        release: Release | None = None,
    ) -> None:
        """Apply ``step`` where it landed; let the boundary go (a failpoint hit resumed, a
        held request released) as the action calls for."""
        trial = self.trial
        worker = at.worker if step.worker == HITTER else self._named(step.worker)

        def let_go(outcome: str | None = None, *, late_ok: bool = False) -> None:
            if hit is not None:
                hit.resume()
            if release is not None:
                fault_id, arrival, default, release_by = release
                outcome = outcome or default
                if (
                    step.at == "arrival"
                    and outcome != "drop"
                    and not late_ok
                    and time.monotonic() > release_by
                ):
                    # Held before commit past half a lease: its worker may have timed out,
                    # looked, found nothing and sent again, and a late commit would be a
                    # ghost no protocol can see (DESIGN "Fairness"). It fails instead.
                    outcome = "drop"
                    trial.history.append(
                        "supervisor", "note", text="held request dropped: let go too late"
                    )
                # Harmless when the provider's deadline let it go first (noted so).
                trial.release(fault_id, outcome, arrival_id=arrival)

        if step.action == "kill":
            if worker is not None and worker.alive():
                trial.crash(worker, step.signal, hit=hit if worker is at.worker else None)
            let_go()
            if step.restart:
                trial.start_worker()
        elif step.action == "pause":
            self._pause(step, worker, let_go, release)
        elif step.action == "provider_fault":
            if step.at != "start":  # armed already (_arm)
                self._provider_fault(step)
            # Armed while the request is held: at arrival or commit it then goes through;
            # at response its answer is lost as always, so the fault meets the attempt
            # left unknown (a failing lookup at response is what reconcile runs into).
            let_go("respond" if release is not None and step.at != "response" else None)
        elif step.action == "toxic":
            self._toxic(step, let_go, release)
        elif step.action == "duplicate":
            self._duplicate(at, let_go, release)
        elif step.action == "restore":
            let_go()
            self._restore()

    def _pause(
        self, step: FaultStep, worker: WorkerHandle | None, let_go: LetGo, release: Release | None
    ) -> None:
        trial = self.trial
        if worker is None or not worker.alive():
            let_go()
            return
        trial.send(worker, "SIGSTOP")
        trial.stop_clear_of_write_locks(worker)
        let_go("respond" if release is not None and step.at == "arrival" else None)
        if step.duration_s > trial.config.lease_ttl_s and not self._others(worker):
            # A stop past the lease is the slow-worker fault: someone must be there
            # to take the job over (the table's lease_expiry_slow_worker does so too).
            trial.start_worker()
        trial.sleep(step.duration_s)
        trial.send(worker, "SIGCONT")

    def _toxic(self, step: FaultStep, let_go: LetGo, release: Release | None) -> None:
        trial = self.trial
        net = trial.network
        if net is None:
            trial.history.append("supervisor", "note", text="toxic skipped: no Toxiproxy")
            let_go()
            return
        attrs: dict[str, Any] = dict(step.attributes)
        name = net.on("provider", step.toxic, **attrs)
        let_go("respond" if release is not None else None)
        trial.sleep(step.duration_s)
        net.off("provider", name)

    def _duplicate(self, at: _At, let_go: LetGo, release: Release | None) -> None:
        trial = self.trial
        assert trial.target is not None
        job = at.job or (trial.jobs[0] if trial.jobs else None)
        if job is None:
            let_go(None)
            return
        before = len(trial.writes(job))
        second = trial.target.redelivery == "second_consumer"
        if second:
            if trial.cell.provider != "idempotent":
                # Two ledgers and no key: nothing could keep the effect single (DESIGN).
                trial.history.append(
                    "supervisor", "note", text="duplicate skipped: only a key protects it"
                )
                let_go(None)
                return
            other = trial.add_consumer(job)
            trial.start_worker(consumer=other)
            # Its own ledger, so no lease of the first worker's is raced: the held request
            # waits for the second consumer's, as the table's driver waits (a slow start
            # on a loaded machine must not turn the duplicate into a sequential retry).
            release_by = time.monotonic() + SECOND_CONSUMER_WAIT_S
        else:
            trial.enqueue(job)
            release_by = release[3] if release is not None else 0.0
        if release is not None:
            while time.monotonic() < release_by and len(trial.writes(job)) <= before:
                trial.sleep(0.02)
            # A second consumer's wait is bounded by the table's own, not by half a lease.
            let_go("commit", late_ok=second)
        else:
            let_go(None)

    def _restore(self) -> None:
        trial = self.trial
        assert trial.target is not None
        for handle in list(trial.workers.values()):
            if handle.alive():
                trial.crash(handle, "SIGKILL")
        trial.target.restore(self.snapshot)
        trial.history.append(
            "supervisor", "restore", note="state restored from before the jobs ran"
        )
        for _ in range(self.schedule.workers):
            trial.start_worker(recovery=True)

    # -- helpers -------------------------------------------------------------------------

    def _note(self, n: int, step: FaultStep, how: str) -> None:
        self.trial.history.append(
            "supervisor", "note", text=f"schedule fault {n}: {step.describe()}: {how}", fault=n
        )

    def _ended(self) -> bool:
        trial = self.trial
        assert trial.target is not None
        others = all(t.quiescent(jobs) for t, jobs in trial.consumers)
        return others and trial.target.quiescent(trial.jobs)

    def _wait(self, ready: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready():
                return True
            self.trial.sleep(_POLL_S)
        return False

    def _others(self, worker: WorkerHandle) -> bool:
        """Whether a worker besides ``worker`` is running (alive and not stopped)."""
        trial = self.trial
        return any(
            h is not worker and h.alive() and h.name not in trial.paused
            for h in trial.workers.values()
        )

    def _named(self, name: str) -> WorkerHandle | None:
        """A worker by name; ``hitter`` (no boundary worker) means the newest alive one."""
        workers = self.trial.workers
        if name != HITTER:
            return workers.get(name)
        alive = [h for h in workers.values() if h.alive()]
        return alive[-1] if alive else None

    def _worker_of(self, source: str) -> WorkerHandle | None:
        return self.trial.workers.get(source.removeprefix("worker:"))

    def _writer_of(self, job: str | None, arrival_id: int) -> WorkerHandle | None:
        if job is None:
            return None
        for e in self.trial.writes(job):
            if e.fields.get("id") == arrival_id and e.fields.get("worker_id"):
                return self.trial.workers.get(str(e.fields["worker_id"]))
        return None
