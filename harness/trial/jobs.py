"""The trial's jobs: their payloads, enqueueing, redelivery, a second consumer."""

from __future__ import annotations

import time
from typing import Any

from harness.targets.base import TargetAdapter
from harness.trial.state import TrialState, sensitive_stand_in


class JobVerbs(TrialState):
    """Verbs on the trial's logical jobs."""

    def job_body(self, job_id: str) -> dict[str, Any]:
        """The job's payload: the same every time it is asked for (a trigger or a
        redelivery carries the same payload), varied by the seed across trials."""
        if job_id not in self._bodies:
            body: dict[str, Any] = {
                "job_id": job_id,
                "amount_cents": self.rng.randrange(100, 100_000),
            }
            fields = self.target.sensitive_fields if self.target is not None else ()
            body.update({f: sensitive_stand_in(f, job_id) for f in fields})
            if self.bind_identities:
                # One identity per job, so a fault on one job's login leaves the others be.
                body["identity"] = f"acct-{job_id.removeprefix('j-')}"
            self._bodies[job_id] = body
        return dict(self._bodies[job_id])

    def enqueue(self, job_id: str | None = None, *, target: TargetAdapter | None = None) -> str:
        if job_id is None:
            job_id = self.next_job_id()
        self.deliver(job_id, target=target)
        return job_id

    def deliver(self, job_id: str, *, target: TargetAdapter | None = None) -> bool:
        """Put ``job_id`` in the target's queue (again, if it is there already); True when
        the queue refused this very delivery as a job it already holds."""
        target = target or self.target
        assert target is not None
        if job_id not in self.jobs:
            self.jobs.append(job_id)
        # Stamped when the delivery began: a worker may take the job up before a slow
        # enqueue command has exited.
        t = time.monotonic()
        body = self.job_body(job_id)
        # This call's own answer: two deliveries of one job may run at once.
        refused = target.enqueue(job_id, self.provider_name, body, steps=self.steps)
        # The job's identity, when it names one: the oracle holds every call to it.
        bound = {"identity": body["identity"]} if "identity" in body else {}
        if refused:
            bound["queued"] = False  # the queue said it already holds the job
        self.history.append("supervisor", "enqueue", job=job_id, t=t, **bound)
        return refused

    def refused(self, job_id: str, *, since: float = 0.0) -> bool:
        """The target's queue refused a delivery of ``job_id`` enqueued after ``since``
        as a job it already holds (its enqueue command printed ``{"queued": false}``)."""
        return any(
            e.job == job_id and e.t >= since and e.fields.get("queued") is False
            for e in self.history.of_kind("enqueue")
        )

    def next_job_id(self) -> str:
        """The id :meth:`enqueue` gives the next new job (to arm a fault for it first)."""
        return f"j-{len(self.jobs) + 1:04d}"

    def redeliver(self, job_id: str) -> bool:
        """Deliver a completed job again: its acknowledgement was lost on the way."""
        assert self.target is not None
        t = time.monotonic()
        again = self.target.redeliver(
            job_id, self.provider_name, self.job_body(job_id), steps=self.steps
        )
        refused = {"queued": False} if job_id in self.target.refused else {}
        self.history.append("supervisor", "enqueue", job=job_id, t=t, redelivered=again, **refused)
        return again

    def enqueue_batch(self) -> str:
        """Enqueue this trial's jobs; the first is the one the fault aims at."""
        first = self.enqueue()
        for _ in range(self.config.jobs_per_trial - 1):
            self.enqueue()
        return first

    def add_consumer(self, job_id: str) -> TargetAdapter:
        """A second consumer given ``job_id`` too, with a ledger of its own (one message
        delivered to two subscribers); its workers call the same provider."""
        assert self.provider is not None
        sub = self.dir / f"consumer-{len(self.consumers) + 2}"
        sub.mkdir()
        other = self._make_target(sub)
        other.setup()
        other.attach_providers([p.client for p in self.providers.values()], self.provider_env())
        self.consumers.append((other, [job_id]))
        other.enqueue(job_id, self.provider_name, self.job_body(job_id))
        self.history.append("supervisor", "enqueue", job=job_id, consumer=len(self.consumers) + 1)
        return other
