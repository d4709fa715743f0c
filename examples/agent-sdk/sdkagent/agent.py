"""One job: claimed from the record, planned by the model, each tool call made safe.

    after_claim
    ask the model for the plan (the job's document in, tool calls out)
    for each call, charge at billing then notify at chat:
        look it up first if an earlier call may have landed   before_reconcile, after_reconcile
            confirmed -> next call; not_found -> call; conflict -> needs_review
        dead-letter if the cap of writes is reached
        persist the key (or marker) and count the write        before_external_call
        renew the lease (stop if it was lost)
        call through the SDK: the key and marker come from the job, never the plan
            answered -> confirm in the record         after_external_call, after_local_write
            no answer, Stripe 409 -> unknown -> look it up first; 5xx -> back off, call again
    tell the model the results (its closing answer is not needed)

The model re-plans a retried job in other words (the ``replan`` fault: reordered
arguments, other tool-call ids): nothing that keeps a job to one effect may come from
the plan. Each buggy variant (``--bug``) breaks one rule; README.md says which.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from rqbilling.failpoint import failpoint
from rqbilling.lease import LeaseKeeper, LeaseLost
from rqbilling.providers import Found, Sent
from rqbilling.record import Claim, Record

from sdkagent.settings import BILLING, CHAT, MODEL, TOOL_PROVIDER, Settings, provider_url
from sdkagent.vendors import SYSTEM, Billing, Chat, Model, Plan, ToolCall

KINDS = {BILLING: "idempotent", CHAT: "plain"}
#: The key column of a write the agent sends with no key of its own (--bug sdk-auto-key).
SDK_KEY = "(the SDK's own, per call)"


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
        body = claim.doc.get("body") or {}
        identity = body.get("identity") if isinstance(body, dict) else None
        who = (s.call_timeout_s, s.worker_id, claim.token, identity)
        self.model = Model(s.model_base_url, *who)
        self.billing = Billing(provider_url(BILLING), *who)
        self.chat = Chat(provider_url(CHAT), *who)
        self.review_after_s = max(8.0, 16 * s.lease_ttl_s)
        #: The charge's keys so far under --bug 409-new-key (each 409 makes a new one).
        self.rotations = 0

    # -- the job ----------------------------------------------------------------------

    def run(self) -> str:
        c = self.c
        failpoint("after_claim", c.job_id, c.attempt)
        task = c.doc.get("task")
        if not isinstance(task, dict):
            return self.finish("dead", "the record holds no task for the job")
        for name in (MODEL, BILLING, CHAT):
            if not provider_url(name) and not (name == MODEL and self.s.model_base_url):
                return self.finish("dead", f"no CRASHPOINT_PROVIDER URL for {name!r}")
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": json.dumps(task)},
        ]
        plan = self.plan(messages)
        if isinstance(plan, tuple):
            return self.finish(*plan)
        by_tool = {call.name: call for call in plan.calls}
        for tool, provider in TOOL_PROVIDER.items():
            call = by_tool.get(tool)
            if call is None:
                why = f"the model's plan has no {tool} call ({plan.detail})"
                return self.finish("review" if self.started() else "dead", why)
            end = self.step(provider, call)
            if end is not None:
                return self.finish(*end)
        self.close(messages, plan)
        return self.finish("done", None)

    def started(self) -> bool:
        return any(self.record.step(self.c.job_id, p).sends > 0 for p in TOOL_PROVIDER.values())

    def finish(self, state: str, error: str | None) -> str:
        if not self.record.finish(self.c, state, error):
            raise LeaseLost(f"{self.c.job_id}: lease lost before it could be marked {state}")
        return state + (f" ({error})" if error else "")

    def backoff(self, n: int) -> None:
        time.sleep(min(self.s.lease_ttl_s / 3, 0.025 * 2 ** max(0, n - 1)))

    def boundary(self, provider: str) -> Callable[[str], None]:
        """The failpoints around calls to ``provider``: only the job's own provider (the
        one the harness faults) reports them, so each cell's points are its provider's."""
        c = self.c
        faulted = provider == c.doc.get("provider")

        def at(point: str) -> None:
            if faulted:
                failpoint(point, c.job_id, c.attempt, provider)

        return at

    # -- the model --------------------------------------------------------------------

    def plan(self, messages: list[dict[str, Any]]) -> Plan | tuple[str, str]:
        """The model's tool calls for the job; asked again (a plan is no effect) until
        it answers, or (state, why) when it cannot."""
        boundary = self.boundary(MODEL)
        since = time.monotonic()
        failures = 0
        while True:
            self.lease.ensure("asking the model")
            boundary("before_external_call")
            plan = self.model.ask(messages)
            log(self.s, f"{self.c.job_id}: {plan.detail}")
            if plan.kind == "ok":
                boundary("after_external_call")
                return plan
            end = "review" if self.started() else "dead"
            if plan.kind in ("identity", "refused"):
                return ("review" if plan.kind == "identity" else end), plan.detail
            if time.monotonic() - since > self.review_after_s:
                return end, f"the model did not answer: {plan.detail}"
            failures += 1
            self.backoff(failures)

    def close(self, messages: list[dict[str, Any]], plan: Plan) -> None:
        """Tell the model what each call did (its closing words change nothing)."""
        if plan.message is None:
            return
        results = [
            {"role": "tool", "tool_call_id": call.id, "content": "done"} for call in plan.calls
        ]
        closing = self.model.ask([*messages, plan.message, *results])
        log(self.s, f"{self.c.job_id}: closing answer: {closing.detail}")

    # -- one tool call at its provider ------------------------------------------------

    def key(self, provider: str, call: ToolCall) -> str | None:
        """The charge's idempotency key, or the post's marker: from the job only."""
        job = self.c.job_id
        if provider == CHAT:
            return f"notify-{job}"
        if "sdk-auto-key" in self.s.bugs:
            return None  # BUG: the SDK makes up a fresh key for every call
        if "key-from-plan" in self.s.bugs:
            return f"charge-{call.id}"  # BUG: the model's tool-call id changes on a re-plan
        if "409-new-key" in self.s.bugs and self.rotations:
            return f"charge-{job}-{self.rotations}"  # BUG: a new key after a 409
        return f"charge-{job}"

    def looks_up(self, provider: str) -> bool:
        """Whether an unknown outcome is looked up before the next write."""
        bugs = self.s.bugs
        if provider == CHAT:
            return "repost-without-lookup" not in bugs  # BUG: post again blind
        # BUG (both): trusting a key to make the retry safe, they never look.
        return not ({"sdk-auto-key", "key-from-plan"} & bugs)

    def write(self, provider: str, call: ToolCall, key: str | None) -> Sent:
        job = self.c.job_id
        if provider == BILLING:
            return self.billing.charge(job, call.arguments, key)
        return self.chat.post(job, call.arguments, key or f"notify-{job}")

    def lookup(self, provider: str, call: ToolCall) -> Found:
        job = self.c.job_id
        if provider == BILLING:
            return self.billing.lookup(job)
        return self.chat.lookup(job, str(call.arguments.get("channel")), f"notify-{job}")

    def step(self, provider: str, call: ToolCall) -> tuple[str, str] | None:
        """Make the job's one effect at ``provider``; None once confirmed, else (end, why)."""
        c = self.c
        boundary = self.boundary(provider)
        step = self.record.step(c.job_id, provider)
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
                raise LeaseLost(f"{c.job_id}: lease lost while calling {provider}")
            if unknown and not self.looks_up(provider):
                unknown = False
            if unknown:
                boundary("before_reconcile")
                found = self.lookup(provider, call)
                boundary("after_reconcile")
                log(self.s, f"{c.job_id}: {provider} lookup: {found.outcome} ({found.detail})")
                if found.outcome == "confirmed":
                    self.confirm(provider, self.key(provider, call), found, boundary)
                    return None
                if found.outcome in ("conflict", "identity"):
                    return "review", f"{provider}: outcome unknown; {found.detail}"
                if found.outcome != "not_found":
                    unanswered_since = unanswered_since or time.monotonic()
                    if time.monotonic() - unanswered_since > self.review_after_s:
                        return "review", f"{provider}: outcome unknown; {found.detail}"
                    failures += 1
                    self.backoff(failures)
                    continue
                unknown, unanswered_since = False, None
            if sends >= self.s.max_attempts:
                return "dead", f"{provider}: {sends} writes sent, none confirmed ({last})"
            sends += 1
            key = self.key(provider, call)
            if not self.record.submit(c, provider, KINDS[provider], key or SDK_KEY, sends):
                raise LeaseLost(f"{c.job_id}: lease lost before calling {provider}")
            boundary("before_external_call")
            self.lease.ensure(f"the call to {provider}")
            sent = self.write(provider, call, key)
            log(self.s, f"{c.job_id}: {provider} write {sends}: {sent.kind} ({sent.detail})")
            last = sent.detail
            if sent.kind == "ok":
                boundary("after_external_call")
                self.confirm(provider, key, Found("confirmed", sent.detail, sent.ref), boundary)
                return None
            self.record.note(c, provider, sent.detail)
            if sent.kind == "in_use" and "409-new-key" in self.s.bugs:
                # BUG: "key in use" read as a failure; the next write gets a new key.
                self.rotations += 1
                failures += 1
                self.backoff(failures)
            elif sent.kind in ("unknown", "in_use"):
                # No answer, or the same key still in flight: look it up before any retry.
                unknown = True
                self.backoff(2 if sent.kind == "in_use" else 1)
            elif sent.kind == "failed":
                failures += 1
                self.backoff(failures)
            elif sent.kind in ("conflict", "identity"):
                return "review", f"{provider}: {sent.detail}"
            else:
                return "dead", f"{provider}: {sent.detail}"

    def confirm(
        self, provider: str, key: str | None, found: Found, boundary: Callable[[str], None]
    ) -> None:
        kind = KINDS[provider]
        if not self.record.confirm(self.c, provider, kind, key or SDK_KEY, found.ref):
            raise LeaseLost(f"{self.c.job_id}: lease lost before {provider} was recorded")
        boundary("after_local_write")
