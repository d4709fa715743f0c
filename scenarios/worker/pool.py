"""Pool mode: the worker process is a prefork pool's parent. It claims a job, forks a
child that runs the attempt on connections of its own, keeps the lease alive while the
child works, and reaps it.

A child that dies (the OOM killer, a SIGKILL) leaves its attempt where it stopped: the
parent stops renewing, so the lease lapses and the job is claimed again and reconciled,
as after any crash. It never acknowledges a job whose child it lost: nothing says the
effect happened (``child_killed``; the ``ack_when_child_lost`` mutant does, as a prefork
pool that acknowledges early does).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

from scenarios.ledger import Claimed
from scenarios.worker.lease import LeaseKeeper

if TYPE_CHECKING:
    from scenarios.worker.loop import Worker


def run_in_child(worker: Worker, c: Claimed, keeper: LeaseKeeper) -> None:
    """Run ``c``'s attempt in a forked child; the parent renews its lease meanwhile."""
    # Forked before the renewal thread starts: a child of a threaded process may inherit
    # a lock some thread held, and this one has no threads at this point.
    pid = os.fork()
    if pid == 0:
        _child(worker, c, keeper)
    worker.log("dispatched", job=c.job_id, attempt=c.attempt, child=pid)
    with keeper:
        _, status = os.waitpid(pid, 0)
    if not os.WIFSIGNALED(status):
        return
    sig = os.WTERMSIG(status)
    worker.log("child_lost", job=c.job_id, attempt=c.attempt, child=pid, signal=sig)
    if worker.bug("ack_when_child_lost"):
        # MUTANT ack_when_child_lost: the job is taken off the queue anyway.
        worker.ledger().acknowledge(c, now=time.monotonic())


def _child(worker: Worker, c: Claimed, keeper: LeaseKeeper) -> None:
    code = 0
    try:
        worker.forget_connections()
        worker.attempt(c, keeper).run()
    except BaseException as exc:  # the parent reads the exit status, not the exception
        worker.log("attempt_abandoned", job=c.job_id, attempt=c.attempt, error=repr(exc))
        code = 1
    finally:
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(code)
