#!/usr/bin/env python3
"""python3 worker.py [--client PATH]
                    [--bug close-without-effect | new-key-on-retry | no-cap | rerun-on-ack-error]

One RQ worker for crashpoint's command target. It takes billing jobs from this trial's
RQ queue on Redis (``REDIS_URL``, default redis://127.0.0.1:6379/0) and runs each in
this process (``SimpleWorker``: no fork, so a signal to the worker reaches the job).
Everything durable lives in ``CRASHPOINT_STATE_DIR`` (see rqbilling/record.py).

SIGTERM or Ctrl-C: exit at once with status 0. Every change is a committed SQLite
transaction, so nothing is half-written, and a job this worker held is delivered again
once its lease runs out.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import uuid
from typing import Any

from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from rq import SimpleWorker
from rqbilling import flow
from rqbilling.client import BILLING, Client, NoClient, load
from rqbilling.delivery import Redeliverer, log, queue
from rqbilling.record import Record
from rqbilling.settings import BUGS, Settings


class ExampleWorker(SimpleWorker):
    def _install_signal_handlers(self) -> None:
        # RQ's warm shutdown would finish the job first; a job held at a failpoint never
        # finishes, and the record makes stopping anywhere safe.
        signal.signal(signal.SIGTERM, _exit_now)
        signal.signal(signal.SIGINT, _exit_now)

    # The job's acknowledgement: RQ stamps its end, then moves it to the finished
    # registry. The broker may be down for either.
    def handle_execution_ended(self, job: Any, queue: Any, heartbeat_ttl: int) -> None:
        self._acknowledge(
            job,
            lambda: super(ExampleWorker, self).handle_execution_ended(job, queue, heartbeat_ttl),
        )

    def handle_job_success(self, job: Any, queue: Any, started_job_registry: Any) -> None:
        self._acknowledge(
            job,
            lambda: super(ExampleWorker, self).handle_job_success(job, queue, started_job_registry),
        )

    def _acknowledge(self, job: Any, ack: Any) -> None:
        try:
            ack()
        except RedisConnectionError as exc:
            s = Settings.from_env(BUG_FLAGS)
            if "rerun-on-ack-error" not in s.bugs:
                # The record already says how the job ended; RQ's registries are only
                # bookkeeping. RQ then quits, and the supervisor starts a new worker.
                raise
            # BUG rerun-on-ack-error: the broker never heard that the job finished, so
            # the job is taken as not run: its record reopened and the job run again once
            # the broker answers.
            job_id, doc = job.args
            log(s, f"{job_id}: acknowledgement failed ({exc}); running the job again")
            _wait_for_broker(s)
            record = Record(s.db_path)
            record.reopen(job_id)
            record.close()
            flow.handle(job_id, doc)


#: The bugs given on the command line (the worker class reads them when an ack fails).
BUG_FLAGS: frozenset[str] = frozenset()


def _wait_for_broker(s: Settings, within_s: float = 30.0) -> None:
    connection = Redis.from_url(s.redis_url)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            connection.ping()
            return
        except RedisConnectionError:
            time.sleep(0.05)


def _exit_now(signum: int, frame: object) -> None:
    sys.stderr.write(
        f"[{os.environ.get('CRASHPOINT_WORKER_ID', 'rq')}] {signal.Signals(signum).name}: exiting\n"
    )
    sys.stderr.flush()
    os._exit(0)


def _arguments() -> tuple[Client, frozenset[str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", metavar="PATH", help="the jobs' client (rqbilling/client.py)")
    parser.add_argument("--bug", action="append", default=[], help=f"one of {', '.join(BUGS)}")
    args = parser.parse_args()
    try:
        client = load(args.client) if args.client else BILLING
    except NoClient as exc:
        parser.error(str(exc))
    known = (*BUGS, *client.bugs)
    for bug in args.bug:
        if bug not in known:
            parser.error(f"--bug {bug}: not one of {', '.join(known)}")
    return client, frozenset(args.bug)


def main() -> None:
    global BUG_FLAGS
    client, BUG_FLAGS = _arguments()
    s = Settings.from_env(BUG_FLAGS)
    signal.signal(signal.SIGTERM, _exit_now)
    signal.signal(signal.SIGINT, _exit_now)
    record = Record(s.db_path)
    if s.recovery:
        # The record was restored from a snapshot: it may say "nothing sent" for a call
        # that was made. Every unfinished job reconciles each call before any write.
        log(s, f"recovery: {record.recover()} unfinished jobs reconcile before any write")
    record.close()
    flow.configure(s, client)
    Redeliverer(s).start()
    connection = Redis.from_url(s.redis_url)
    name = f"{s.worker_id}.{os.getpid()}.{uuid.uuid4().hex[:6]}"
    worker = ExampleWorker([queue(s, connection)], connection=connection, name=name, worker_ttl=30)
    said = f"pid {os.getpid()}, queue {s.queue_name}, lease {s.lease_ttl_s} s"
    said += f", calls {', '.join(client.plan)}"
    said += f", bug {', '.join(sorted(s.bugs))}" if s.bugs else ""
    log(s, f"started ({said})")
    worker.work(logging_level="WARNING", with_scheduler=False)


if __name__ == "__main__":
    main()
