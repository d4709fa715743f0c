"""Deliveries through RQ: the first one by ``enqueue.py``, later ones by any worker.

RQ hands a message to one worker; a worker that dies with it (SIGKILL, a power cut)
leaves it in RQ's started registry, where RQ's own cleanup would find it only minutes
later. The record knows sooner: a job that is unfinished, unleased (or whose lease ran
out) and was not delivered for a lease is delivered again, by exactly one worker.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from redis import Redis
from rq import Queue

from orderdesk.record import Record
from orderdesk.settings import Settings

TASK = "orderdesk.flow.handle"


def queue(s: Settings, connection: Redis) -> Queue:
    return Queue(s.queue_name, connection=connection)


def deliver(q: Queue, job_id: str, doc: dict[str, Any]) -> None:
    # No result kept: the record, not Redis, says how the job ended.
    q.enqueue(
        TASK,
        job_id,
        doc,
        result_ttl=0,
        failure_ttl=300,
        description=f"order job {job_id}",
    )


class Redeliverer(threading.Thread):
    """Looks for jobs to deliver again every quarter lease (at most every 0.25 s)."""

    def __init__(self, s: Settings) -> None:
        super().__init__(name="redeliver", daemon=True)
        self.s = s
        self.interval_s = min(0.25, s.lease_ttl_s / 4)

    def run(self) -> None:
        record = Record(self.s.db_path)
        q = queue(self.s, Redis.from_url(self.s.redis_url))
        while True:
            try:
                for job_id, doc in record.due(self.s.lease_ttl_s):
                    deliver(q, job_id, doc)
                    log(self.s, f"{job_id}: delivered again (unfinished, nobody holds it)")
            except Exception as exc:  # a busy database or broker: look again later
                log(self.s, f"redelivery: {type(exc).__name__}: {exc}")
            time.sleep(self.interval_s)


def log(s: Settings, message: str) -> None:
    sys.stderr.write(f"[{s.worker_id}] {message}\n")
    sys.stderr.flush()
