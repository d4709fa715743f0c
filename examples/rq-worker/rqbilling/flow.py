"""The RQ task: one billing job, claimed from the record, one call per provider.

``handle(job_id, doc)`` runs once per *delivery*, and a job may be delivered more than
once (a duplicate enqueue, a redelivery after a crash). Only the delivery that claims
the job in the record acts; any other returns at once, and RQ acknowledges it.

Each call (``billing`` then ``mailer``) goes:

    reconcile first if an earlier write may have landed   before_reconcile, after_reconcile
        confirmed -> next call; not_found -> write; conflict, no lookup -> needs_review
        no answer, in flight -> look again with backoff (needs_review if it never answers)
    dead-letter if the cap of writes is reached
    persist the key and count the write                   before_external_call
    renew the lease (stop if it was lost)
    write (same key, same body, every time)
        2xx -> confirm in the record                      after_external_call, after_local_write
        timeout, reset, 409 -> unknown -> reconcile       5xx -> back off, write again

The boundaries of a call are reported for the job's own provider (the one the harness
faults in this trial), with ``provider`` in the line, so a cell aimed at the mailer stops
the worker at the mailer's boundaries rather than at the billing call before it.

Which providers a job calls, with which calls and under which key is the client's
(``client.py``: this package's billing client unless ``worker.py --client`` names another).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from redis import Redis

from rqbilling.client import BILLING, Client
from rqbilling.failpoint import failpoint, job_end
from rqbilling.lease import LeaseKeeper, LeaseLost
from rqbilling.providers import Found
from rqbilling.record import STATUS, Claim, Record
from rqbilling.settings import Provider, Settings

_settings: Settings | None = None
_client: Client = BILLING
_record: Record | None = None
_redis: Redis | None = None


def configure(s: Settings, client: Client = BILLING) -> None:
    """Called by worker.py before RQ starts taking jobs."""
    global _settings, _client
    _settings, _client = s, client


def _state() -> tuple[Settings, Record, Redis]:
    global _settings, _record, _redis
    if _settings is None:
        _settings = Settings.from_env()
    if _record is None:
        _record = Record(_settings.db_path)
    if _redis is None:
        _redis = Redis.from_url(_settings.redis_url)
    return _settings, _record, _redis


def log(s: Settings, message: str) -> None:
    sys.stderr.write(f"[{s.worker_id}] {message}\n")
    sys.stderr.flush()


def handle(job_id: str, doc: dict[str, Any]) -> str:
    s, record, redis = _state()
    # A delivery carries the job document, so a record that lost the job (restored from
    # before it was enqueued) learns it again; a job seen before keeps its record.
    record.add(job_id, doc)
    claim = record.claim(job_id, s.worker_id, s.lease_ttl_s, lambda: next_token(s, redis, job_id))
    if isinstance(claim, str):
        # Reported so a harness sees the delivery taken up (a redelivery meeting the
        # first attempt in flight, say); then declined: the job is another worker's
        # under a live lease, or finished.
        failpoint("after_claim", job_id, 0)
        log(s, f"{job_id}: delivery declined: {claim}")
        return f"declined: {claim}"
    log(s, f"{job_id}: claimed, attempt {claim.attempt}, token {claim.token}")
    with LeaseKeeper(record, claim, s.lease_ttl_s) as lease:
        try:
            outcome = Job(s, record, claim, lease, _client).run()
        except LeaseLost as exc:
            log(s, f"{exc}; the new owner finishes the job")
            return "lease lost"
    log(s, f"{job_id}: {outcome}")
    return outcome


def next_token(s: Settings, redis: Redis, job_id: str) -> int:
    """The next fencing token of a job; kept a day, far longer than any trial."""
    key = s.redis_key("token", job_id)
    pipe = redis.pipeline()
    pipe.incr(key)
    pipe.expire(key, 86400)
    return int(pipe.execute()[0])


class Job:
    def __init__(
        self, s: Settings, record: Record, claim: Claim, lease: LeaseKeeper, client: Client
    ) -> None:
        self.s = s
        self.record = record
        self.c = claim
        self.lease = lease
        self.client = client
        self.calls = client.calls(worker_id=s.worker_id, timeout_s=s.http_timeout_s)
        self.review_after_s = max(8.0, 16 * s.lease_ttl_s)

    def run(self) -> str:
        c = self.c
        failpoint("after_claim", c.job_id, c.attempt)
        own = str(c.doc.get("provider") or "")
        plan = [*self.client.plan, *([own] if own and own not in self.client.plan else [])]
        for name in plan:
            p = self.s.provider(name, self.client.kinds.get(name, "idempotent"))
            if p is None:
                if name == own:
                    return self.finish("dead", f"no CRASHPOINT_PROVIDER URL for {name!r}")
                log(self.s, f"{c.job_id}: no URL for provider {name!r}; that call is skipped")
                continue
            end = self.call(p)
            if end is not None:
                return self.finish(*end)
        return self.finish("done", None)

    def finish(self, state: str, error: str | None) -> str:
        if not self.record.finish(self.c, state, error):
            raise LeaseLost(f"{self.c.job_id}: lease lost before it could be marked {state}")
        # Durable now: the harness may stop waiting for this job without a status poll.
        job_end(self.c.job_id, STATUS.get(state, "pending"), self.c.attempt)
        return f"{state}" + (f" ({error})" if error else "")

    def key(self, p: Provider, sends: int) -> str:
        """The idempotency key (or client marker) of this job's call to ``p``."""
        if "new-key-on-retry" in self.s.bugs:
            # BUG new-key-on-retry: the key names the retry, so no retry is recognised.
            return f"{p.name}-{self.c.job_id}-retry-{sends}"
        return self.client.key(p.name, self.c.job_id, self.s.bugs)

    def backoff(self, n: int) -> None:
        time.sleep(min(self.s.lease_ttl_s / 3, 0.025 * 2 ** max(0, n - 1)))

    def call(self, p: Provider) -> tuple[str, str] | None:
        """Make the job's one effect at ``p``; None once confirmed, else (end, why)."""
        c = self.c
        faulted = p.name == c.doc.get("provider")

        def boundary(point: str) -> None:
            if faulted:
                failpoint(point, c.job_id, c.attempt, p.name)

        step = self.record.step(c.job_id, p.name)
        if step.state == "confirmed":
            return None
        sends = step.sends
        # An earlier owner's write (sends > 0) may have landed; after a restore even a
        # record that says "nothing sent" may be out of date.
        unknown = sends > 0 or c.must_reconcile
        failures = 0
        unanswered_since: float | None = None
        last = "none"
        while True:
            if self.lease.lost.is_set():
                raise LeaseLost(f"{c.job_id}: lease lost while calling {p.name}")
            key = self.key(p, sends)
            if unknown:
                boundary("before_reconcile")
                found = self.calls.lookup(p, job_id=c.job_id, key=key, token=c.token)
                boundary("after_reconcile")
                log(self.s, f"{c.job_id}: {p.name} lookup: {found.outcome} ({found.detail})")
                if found.outcome == "confirmed":
                    self.confirm(p, key, found, boundary)
                    return None
                if found.outcome in ("conflict", "unqueryable"):
                    return "review", f"{p.name}: outcome unknown; {found.detail}"
                if found.outcome != "not_found":
                    # No answer, or the provider is still executing: ask again later.
                    unanswered_since = unanswered_since or time.monotonic()
                    if time.monotonic() - unanswered_since > self.review_after_s:
                        return "review", f"{p.name}: outcome unknown; lookups: {found.detail}"
                    failures += 1
                    self.backoff(failures)
                    continue
                unknown, unanswered_since = False, None
            if sends >= self.s.write_cap:
                return "dead", f"{p.name}: {sends} writes sent, none committed (last: {last})"
            sends += 1
            if not self.record.submit(c, p.name, p.kind, key, sends):
                raise LeaseLost(f"{c.job_id}: lease lost before writing to {p.name}")
            boundary("before_external_call")
            self.lease.ensure(f"the write to {p.name}")
            sent = self.calls.write(p, dict(c.doc.get("body") or {}), key=key, token=c.token)
            log(self.s, f"{c.job_id}: {p.name} write {sends}: {sent.kind} ({sent.detail})")
            last = sent.detail
            if sent.kind == "ok":
                boundary("after_external_call")
                self.confirm(p, key, Found("confirmed", sent.detail, sent.ref), boundary)
                return None
            self.record.note(c, p.name, sent.detail)
            if sent.kind == "unknown":
                unknown = True
                self.backoff(1)
            elif sent.kind == "failed":
                if "close-without-effect" in self.s.bugs and p.name == "mailer":
                    # BUG close-without-effect: a failed receipt is let go as if sent.
                    return None
                failures += 1
                self.backoff(failures)
            elif sent.kind == "conflict":
                return "review", f"{p.name}: {sent.detail}"
            else:
                return "dead", f"{p.name}: {sent.detail}"

    def confirm(self, p: Provider, key: str, found: Found, boundary: Callable[[str], None]) -> None:
        if not self.record.confirm(self.c, p.name, p.kind, key, found.ref):
            raise LeaseLost(f"{self.c.job_id}: lease lost before {p.name} was recorded")
        boundary("after_local_write")
