#!/usr/bin/env python3
"""python3 worker.py [--client PATH] [--bug close-without-effect | new-key-on-retry | no-cap]

One RQ worker for crashpoint's command target. It takes billing jobs from this trial's
RQ queue on Redis (``REDIS_URL``, default redis://127.0.0.1:6379/0) and runs each in
this process (``SimpleWorker``: no fork, so a signal to the worker reaches the job).
Everything durable lives in ``CRASHPOINT_STATE_DIR`` (see rqbilling/record.py).

``--client PATH`` runs the jobs' calls through another client (a package directory or a
``.py`` file with a ``CLIENT``, rqbilling/client.py), whose own bugs ``--bug`` then offers
too; by default a job charges at ``billing`` and mails through ``mailer``.

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

from redis import Redis
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
    client, bugs = _arguments()
    s = Settings.from_env(bugs)
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
