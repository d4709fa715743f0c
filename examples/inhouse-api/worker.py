#!/usr/bin/env python3
"""python3 worker.py [--bug fresh-key]

One RQ worker for crashpoint's command target. It takes order jobs from this trial's
RQ queue on Redis (``REDIS_URL``, default redis://127.0.0.1:6379/0) and runs each in
this process (``SimpleWorker``: no fork, so a signal to the worker reaches the job).
Everything durable lives in ``CRASHPOINT_STATE_DIR`` (see orderdesk/record.py).

SIGTERM or Ctrl-C: exit at once with status 0. Every change is a committed SQLite
transaction, so nothing is half-written, and a job this worker held is delivered again
once its lease runs out.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import uuid

from orderdesk import flow
from orderdesk.delivery import Redeliverer, log, queue
from orderdesk.record import Record
from orderdesk.settings import BUGS, Settings
from redis import Redis
from rq import SimpleWorker


class ExampleWorker(SimpleWorker):
    def _install_signal_handlers(self) -> None:
        # RQ's warm shutdown would finish the job first; a job held at a failpoint never
        # finishes, and the record makes stopping anywhere safe.
        signal.signal(signal.SIGTERM, _exit_now)
        signal.signal(signal.SIGINT, _exit_now)


def _exit_now(signum: int, frame: object) -> None:
    sys.stderr.write(
        f"[{os.environ.get('CRASHPOINT_WORKER_ID', 'rq')}] {signal.Signals(signum).name}: exiting\n"
    )
    sys.stderr.flush()
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bug", choices=BUGS, action="append", default=[])
    args = parser.parse_args()
    s = Settings.from_env(frozenset(args.bug))
    signal.signal(signal.SIGTERM, _exit_now)
    signal.signal(signal.SIGINT, _exit_now)
    record = Record(s.db_path)
    if s.recovery:
        # The record was restored from a snapshot: it may say "nothing sent" for a call
        # that was made. Every unfinished job reconciles each call before any write.
        log(s, f"recovery: {record.recover()} unfinished jobs reconcile before any write")
    record.close()
    flow.configure(s)
    Redeliverer(s).start()
    connection = Redis.from_url(s.redis_url)
    name = f"{s.worker_id}.{os.getpid()}.{uuid.uuid4().hex[:6]}"
    worker = ExampleWorker([queue(s, connection)], connection=connection, name=name, worker_ttl=30)
    bugs = f", bug {', '.join(sorted(s.bugs))}" if s.bugs else ""
    log(s, f"started (pid {os.getpid()}, queue {s.queue_name}, lease {s.lease_ttl_s} s{bugs})")
    worker.work(logging_level="WARNING", with_scheduler=False)


if __name__ == "__main__":
    main()
