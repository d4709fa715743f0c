"""The outbox relay (``CRASHPOINT_ROLE=relay``): sends pending outbox rows, marks them sent.

A second kind of process beside the workers. Each row is sent with its outbox id as the
idempotency key, so a relay killed after the provider took the message but before the
row was marked sent sends it again under the same key, and the provider replays its
answer instead of committing a second effect. The send is counted before it leaves, and
a row is sent at most ``max_attempts`` times.

The relay is for idempotent providers: a plain one could only be protected by a lookup
before every resend, which this relay does not make.
"""

from __future__ import annotations

import os
import time
import uuid

from harness.contract.failpoint import failpoint
from scenarios.ledger import LedgerStore, OutboxRow, open_ledger
from scenarios.worker.base import ReferenceProcess
from scenarios.worker.config import WorkerConfig

#: As the worker's (scenarios.worker.loop): a broken ledger link is not mended at once.
RECONNECT_PAUSE_S = 0.1
#: The longest pause between two sends of one row the provider did not take.
MAX_BACKOFF_S = 1.0


class Relay(ReferenceProcess):
    def __init__(self, cfg: WorkerConfig) -> None:
        super().__init__(cfg)
        self._ledger: LedgerStore | None = None

    def ledger(self) -> LedgerStore:
        if self._ledger is None:
            self._ledger = open_ledger(
                self.cfg.ledger_dsn, schema=self.cfg.ledger_schema, base_dir=self.cfg.state_dir
            )
            self._ledger.setup()
        return self._ledger

    def _drop(self) -> None:
        if self._ledger is not None:
            try:
                self._ledger.close()
            except Exception as exc:  # already broken; reconnecting is the remedy
                self.log("close_failed", error=repr(exc))
        self._ledger = None

    def run(self) -> None:
        self.log("start", pid=os.getpid(), mutant=self.cfg.mutant, role="relay")
        while not self.stopping.is_set():
            try:
                rows = [r for r in self.ledger().pending_outbox() if self.sendable(r)]
                for row in rows:
                    if self.stopping.is_set():
                        break
                    self.send(row)
            except Exception as exc:
                self.log("ledger_error", step="relay", error=repr(exc))
                self._drop()
                self.stopping.wait(RECONNECT_PAUSE_S)
                continue
            if not rows:
                self.stopping.wait(self.cfg.poll_s)
        self.log("stop")
        self._drop()
        self.calls.close()

    def sendable(self, row: OutboxRow) -> bool:
        if row.sends < self.cfg.max_attempts:
            return True
        self.log("outbox_exhausted", job=row.job_id, sends=row.sends)
        return False

    def key(self, row: OutboxRow) -> str:
        if self.bug("relay_without_key"):
            # MUTANT relay_without_key: every send is a new request to the provider.
            return f"msg-{uuid.uuid4().hex}"
        return row.outbox_id

    def send(self, row: OutboxRow) -> None:
        spec = self.cfg.provider(row.provider)
        if spec is None:
            self.log("no_provider", provider=row.provider, job=row.job_id)
            self.stopping.wait(self.cfg.poll_s)
            return
        n = self.ledger().count_outbox_send(row.outbox_id)
        key = self.key(row)
        failpoint("before_relay_send", row.job_id, n)
        sent = self.calls.write(spec, row.body, key=key, marker=key, token=None)
        self.log("relay_send", job=row.job_id, key=key, kind=sent.kind, reason=sent.reason)
        if sent.kind != "ok":
            # Unknown or refused: the row stays pending and goes again under the same key.
            self.stopping.wait(min(self.cfg.backoff_s * 2.0 ** (n - 1), MAX_BACKOFF_S))
            return
        failpoint("after_relay_send", row.job_id, n)
        marked = self.ledger().mark_outbox_sent(
            row.outbox_id, result_ref=sent.ref, now=time.monotonic()
        )
        self.log("outbox_sent", job=row.job_id, ref=sent.ref, marked=marked)
