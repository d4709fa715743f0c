"""One job: claimed from the record, then one tool call per server, each made safe.

Each call (``tickets`` then ``chat``) goes:

    look it up first if an earlier call may have landed  before_reconcile, after_reconcile
        confirmed -> next call; not_found -> call; conflict, no lookup tool -> needs_review
        no answer, in flight -> look again with backoff (needs_review if it never answers)
    dead-letter if the cap of calls is reached
    persist the key and count the call                   before_external_call
    renew the lease (stop if it was lost)
    call the tool (same key or marker, same document, every time)
        answered -> confirm in the record               after_external_call, after_local_write
        no answer, 409 -> unknown -> look it up         5xx -> back off, call again

A tool's annotations are hints from a server the agent does not control; whether a
retry is safe is decided by the lookup, never by ``idempotentHint``. The bug
``retry-without-lookup`` is the agent that skips it: a call that got no answer is
simply made again, which at a plain server is a second message.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from rqbilling.failpoint import failpoint, job_end
from rqbilling.lease import LeaseKeeper, LeaseLost
from rqbilling.providers import Found
from rqbilling.record import STATUS, Claim, Record

from mcpagent.settings import PLAN, Server, Settings
from mcpagent.tools import Tools


def log(s: Settings, message: str) -> None:
    sys.stderr.write(f"[{s.worker_id}] {message}\n")
    sys.stderr.flush()


def handle(s: Settings, record: Record, job_id: str) -> str:
    claim = record.claim(job_id, s.worker_id, s.lease_ttl_s, lambda: 0)
    if isinstance(claim, str):
        return f"declined: {claim}"
    log(s, f"{job_id}: claimed, attempt {claim.attempt}, token {claim.token}")
    with LeaseKeeper(record, claim, s.lease_ttl_s) as lease:
        try:
            outcome = Job(s, record, claim, lease).run()
        except LeaseLost as exc:
            log(s, f"{exc}; the new owner finishes the job")
            return "lease lost"
    log(s, f"{job_id}: {outcome}")
    return outcome


class Job:
    def __init__(self, s: Settings, record: Record, claim: Claim, lease: LeaseKeeper) -> None:
        self.s = s
        self.record = record
        self.c = claim
        self.lease = lease
        self.tools = Tools(worker_id=s.worker_id, timeout_s=s.call_timeout_s)
        self.review_after_s = max(8.0, 16 * s.lease_ttl_s)

    def run(self) -> str:
        c = self.c
        failpoint("after_claim", c.job_id, c.attempt)
        own = str(c.doc.get("provider") or "")
        for name in [*PLAN, *([own] if own and own not in PLAN else [])]:
            server = self.s.server(name)
            if server is None:
                if name == own:
                    return self.finish("dead", f"no CRASHPOINT_PROVIDER URL for {name!r}")
                continue
            end = self.call(server)
            if end is not None:
                return self.finish(*end)
        return self.finish("done", None)

    def finish(self, state: str, error: str | None) -> str:
        if not self.record.finish(self.c, state, error):
            raise LeaseLost(f"{self.c.job_id}: lease lost before it could be marked {state}")
        # Durable now: the harness may stop waiting for this job without a status poll.
        job_end(self.c.job_id, STATUS.get(state, "pending"), self.c.attempt)
        return state + (f" ({error})" if error else "")

    def backoff(self, n: int) -> None:
        time.sleep(min(self.s.lease_ttl_s / 3, 0.025 * 2 ** max(0, n - 1)))

    def call(self, server: Server) -> tuple[str, str] | None:
        """Make the job's one effect at ``server``; None once confirmed, else (end, why)."""
        c = self.c
        faulted = server.name == c.doc.get("provider")

        def boundary(point: str) -> None:
            if faulted:
                failpoint(point, c.job_id, c.attempt, server.name)

        step = self.record.step(c.job_id, server.name)
        if step.state == "confirmed":
            return None
        # The key (or marker) names the job and the server, never the attempt.
        key = f"{server.name}-{c.job_id}"
        sends = step.sends
        # An earlier owner's call (sends > 0) may have landed; after a restore even a
        # record that says "nothing sent" may be out of date.
        unknown = sends > 0 or c.must_reconcile
        failures = 0
        unanswered_since: float | None = None
        last = "none"
        while True:
            if self.lease.lost.is_set():
                raise LeaseLost(f"{c.job_id}: lease lost while calling {server.name}")
            if unknown and "retry-without-lookup" in self.s.bugs:
                # BUG retry-without-lookup: a call that got no answer is just made again.
                unknown = False
            if unknown:
                boundary("before_reconcile")
                found = self.tools.lookup(server, key=key, token=c.token)
                boundary("after_reconcile")
                log(self.s, f"{c.job_id}: {server.name} lookup: {found.outcome} ({found.detail})")
                if found.outcome == "confirmed":
                    self.confirm(server, key, found, boundary)
                    return None
                if found.outcome in ("conflict", "unqueryable"):
                    return "review", f"{server.name}: outcome unknown; {found.detail}"
                if found.outcome != "not_found":
                    unanswered_since = unanswered_since or time.monotonic()
                    if time.monotonic() - unanswered_since > self.review_after_s:
                        return "review", f"{server.name}: outcome unknown; {found.detail}"
                    failures += 1
                    self.backoff(failures)
                    continue
                unknown, unanswered_since = False, None
            if sends >= self.s.max_attempts:
                return "dead", f"{server.name}: {sends} calls made, none committed ({last})"
            sends += 1
            if not self.record.submit(c, server.name, server.kind, key, sends):
                raise LeaseLost(f"{c.job_id}: lease lost before calling {server.name}")
            boundary("before_external_call")
            self.lease.ensure(f"the call to {server.name}")
            sent = self.tools.write(server, dict(c.doc.get("body") or {}), key=key, token=c.token)
            log(self.s, f"{c.job_id}: {server.name} call {sends}: {sent.kind} ({sent.detail})")
            last = sent.detail
            if sent.kind == "ok":
                boundary("after_external_call")
                self.confirm(server, key, Found("confirmed", sent.detail, sent.ref), boundary)
                return None
            self.record.note(c, server.name, sent.detail)
            if sent.kind == "unknown":
                unknown = True
                self.backoff(1)
            elif sent.kind == "failed":
                failures += 1
                self.backoff(failures)
            elif sent.kind == "conflict":
                return "review", f"{server.name}: {sent.detail}"
            else:
                return "dead", f"{server.name}: {sent.detail}"

    def confirm(
        self, server: Server, key: str, found: Found, boundary: Callable[[str], None]
    ) -> None:
        if not self.record.confirm(self.c, server.name, server.kind, key, found.ref):
            raise LeaseLost(f"{self.c.job_id}: lease lost before {server.name} was recorded")
        boundary("after_local_write")
