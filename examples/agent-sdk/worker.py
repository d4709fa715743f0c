#!/usr/bin/env python3
"""python3 worker.py [--bug sdk-auto-key|repost-without-lookup|409-new-key|key-from-plan]

One agent worker for crashpoint's command target. It takes jobs from the trial's SQLite
record (``CRASHPOINT_STATE_DIR/agent-sdk.db``, which is the queue too): a job that is
queued, or whose lease ran out, is claimed by exactly one worker (compare-and-set); the
model plans it and the agent charges and notifies through the vendors' SDKs
(sdkagent/agent.py).

SIGTERM or Ctrl-C: exit at once with status 0. Every change is a committed SQLite
transaction, so nothing is half-written, and a job this worker held is taken over by
another once its lease runs out.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import sdkagent  # noqa: F401  (puts the RQ example's record on the path)
from rqbilling.record import Record
from sdkagent.agent import handle, log
from sdkagent.settings import BUGS, Settings


def _exit_now(signum: int, frame: object) -> None:
    sys.stderr.write(f"[{os.environ.get('CRASHPOINT_WORKER_ID', 'agent')}] exiting\n")
    sys.stderr.flush()
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bug", choices=BUGS, action="append", default=[])
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _exit_now)
    signal.signal(signal.SIGINT, _exit_now)
    s = Settings.from_env(frozenset(args.bug))
    s.state_dir.mkdir(parents=True, exist_ok=True)
    record = Record(s.db_path)
    if s.recovery:
        # The record was restored from a snapshot: it may say "nothing sent" for a call
        # that was made. Every unfinished job looks each call up before making it.
        log(s, f"recovery: {record.recover()} unfinished jobs look up before calling")
    bugs = f", bug {', '.join(sorted(s.bugs))}" if s.bugs else ""
    log(s, f"started (pid {os.getpid()}, lease {s.lease_ttl_s} s{bugs})")
    poll_s = min(0.05, s.lease_ttl_s / 10)
    while True:
        # Unfinished jobs nobody holds: queued, or their owner's lease ran out.
        for job_id, _doc in record.due(0.0):
            handle(s, record, job_id)
        time.sleep(poll_s)


if __name__ == "__main__":
    main()
