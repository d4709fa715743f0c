"""The worker process: claim, run one attempt, repeat, until SIGTERM.

A ledger error in the middle of an attempt (a reset link to PostgreSQL, say) abandons the
attempt rather than guessing: everything the next owner needs (the key, ``submitted``) was
persisted before the call, so after the lease lapses the job is reclaimed and reconciled.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from types import FrameType

from scenarios.ledger import Claimed, LedgerStore, open_ledger
from scenarios.worker.attempt import Attempt
from scenarios.worker.base import ReferenceProcess
from scenarios.worker.config import WorkerConfig, version_flag
from scenarios.worker.lease import LeaseKeeper
from scenarios.worker.pool import run_in_child

#: Pause after a ledger error before reconnecting: a broken link (a reset to
#: PostgreSQL, a locked file) is not mended by asking again at once, and a tight retry
#: would spin a core while it lasts.
RECONNECT_PAUSE_S = 0.1


class Worker(ReferenceProcess):
    def __init__(self, cfg: WorkerConfig) -> None:
        super().__init__(cfg)
        self._ledger: LedgerStore | None = None
        self._renewals: LedgerStore | None = None

    # -- ledger connections ---------------------------------------------------------

    def _open(self) -> LedgerStore:
        return open_ledger(
            self.cfg.ledger_dsn, schema=self.cfg.ledger_schema, base_dir=self.cfg.state_dir
        )

    def ledger(self) -> LedgerStore:
        if self._ledger is None:
            self._ledger = self._open()
        return self._ledger

    def renewals(self) -> LedgerStore:
        if self._renewals is None:
            self._renewals = self._open()
        return self._renewals

    def _drop_connections(self) -> None:
        for store in (self._ledger, self._renewals):
            if store is not None:
                try:
                    store.close()
                except Exception as exc:  # already broken; reconnecting is the remedy
                    self.log("close_failed", error=repr(exc))
        self._ledger = self._renewals = None

    # -- the loop -------------------------------------------------------------------

    def start(self) -> None:
        """Create the tables if needed and, after a restore, queue every unfinished job
        for reconcile before anything else can run."""
        while not self.stopping.is_set():
            try:
                self.ledger().setup()
                # MUTANT skip_reconcile_after_restart: the restore is not taken into account.
                if self.cfg.recovery and not self.bug("skip_reconcile_after_restart"):
                    n = self.ledger().mark_recovery(now=time.monotonic())
                    self.log("recovery", queued=n)
                return
            except Exception as exc:
                self.log("ledger_error", step="start", error=repr(exc))
                self._drop_connections()
                self.stopping.wait(RECONNECT_PAUSE_S)

    def attempt(self, c: Claimed, keeper: LeaseKeeper) -> Attempt:
        return Attempt(
            c,
            cfg=self.cfg,
            ledger=self.ledger(),
            calls=self.calls,
            lease=keeper,
            stopping=self.stopping,
            bug=self.bug,
            log=self.log,
        )

    def forget_connections(self) -> None:
        """In a forked child: never touch the parent's ledger connections; open its own."""
        self._ledger = self._renewals = None

    def run(self) -> None:
        self.log("start", pid=os.getpid(), mutant=self.cfg.mutant)
        self.start()
        cap = None if self.bug("uncapped_retries") else self.cfg.max_attempts
        while not self.stopping.is_set():
            try:
                c = self.ledger().claim(
                    self.cfg.worker_id,
                    now=time.monotonic(),
                    ttl_s=self.cfg.lease_ttl_s,
                    max_attempts=cap,
                )
            except Exception as exc:
                self.log("ledger_error", step="claim", error=repr(exc))
                self._drop_connections()
                self.stopping.wait(RECONNECT_PAUSE_S)
                continue
            if c is None:
                self.stopping.wait(self.cfg.poll_s)
                continue
            self.log("claim", job=c.job_id, attempt=c.attempt, token=c.token)
            keeper = LeaseKeeper(
                self.renewals(),
                c,
                ttl_s=self.cfg.lease_ttl_s,
                check_owner=not self.bug("renew_without_owner_check"),
            )
            try:
                if self.cfg.pool:
                    run_in_child(self, c, keeper)
                    continue
                with keeper:
                    self.attempt(c, keeper).run()
            except Exception as exc:
                self.log("attempt_abandoned", job=c.job_id, attempt=c.attempt, error=repr(exc))
                self._drop_connections()
                self.stopping.wait(RECONNECT_PAUSE_S)
        self.log("stop")
        self._drop_connections()
        self.calls.close()


def main() -> int:
    from harness.contract.errors import ConfigError

    try:
        cfg = WorkerConfig.from_env(version_flag(sys.argv[1:], os.environ))
    except ConfigError as exc:
        print(f"crashpoint worker: {exc}", file=sys.stderr)
        return 2
    if cfg.state_dir:
        os.chdir(cfg.state_dir)
    if cfg.role == "relay":
        from scenarios.worker.relay import Relay

        worker: Worker | Relay = Relay(cfg)
    else:
        worker = Worker(cfg)

    def on_term(signum: int, frame: FrameType | None) -> None:
        worker.stopping.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    worker.run()
    # Stopped cleanly: the ledger connections and the provider client are closed, so
    # what is left is the interpreter's own teardown of its modules, which frees nothing
    # the kernel does not and took 20 to 40 ms of every stop (each trial stops one to
    # three workers, and waits for each). What was logged is flushed first.
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(0)
