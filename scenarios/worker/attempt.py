"""One claimed attempt of one logical job, from claim to its durable result.

The order is the protocol: reconcile anything unresolved first; persist the key and
``submitted``; check the lease; call; write the result with compare-and-set. A
multi-step job runs that protocol once per step, in order, from the first step its
ledger does not record as done; each step has its own key. Every ``bug(...)`` check is
where one mutant departs from it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from harness.contract.failpoint import failpoint
from scenarios.ledger import Claimed, LedgerStore
from scenarios.worker.calls import Lookup, ProviderCalls, WriteResult
from scenarios.worker.config import ProviderSpec, WorkerConfig
from scenarios.worker.lease import LeaseKeeper
from scenarios.worker.reconcile import reconcile
from scenarios.worker.upgrade import recorded_by_older, v2_key

#: Call out only with at least this share of the TTL left: a lease that lapses mid-call
#: lets another worker reconcile while our request may still land.
LEASE_MARGIN = 0.25
MAX_BACKOFF_S = 2.0


def idempotency_key(job_id: str, step: str | None = None) -> str:
    """The key of a logical job (and step): derived from them only, stable, safe to log."""
    return f"effect-{job_id}" if step is None else f"effect-{job_id}-{step}"


def outbox_id(job_id: str) -> str:
    """The outbox row of a job's message; the relay sends it as the idempotency key."""
    return f"outbox-{job_id}"


def client_marker(job_id: str, step: str | None = None) -> str:
    """The marker a plain provider stores with the effect; the lookup finds it again."""
    return f"cm-{job_id}" if step is None else f"cm-{job_id}-{step}"


class Attempt:
    def __init__(
        self,
        c: Claimed,
        *,
        cfg: WorkerConfig,
        ledger: LedgerStore,
        calls: ProviderCalls,
        lease: LeaseKeeper,
        stopping: threading.Event,
        bug: Callable[[str], bool],
        log: Callable[..., None],
    ) -> None:
        self.c = c
        self.cfg = cfg
        self.ledger = ledger
        self.calls = calls
        self.lease = lease
        self.stopping = stopping
        self.bug = bug
        self.log = log
        self.cap: int | None = None if bug("uncapped_retries") else cfg.max_attempts
        #: An outcome reached the ledger (the boundary ``after_local_write`` follows it).
        self.wrote = False
        #: The step in progress (None: a single-step job), whether it is the job's last,
        #: and whether it was just recorded as done, so the next one may start.
        self.step: str | None = None
        self.last = True
        self.advance = False
        #: The identity (profile, account) the job is bound to, from its body; every call
        #: for the job acts under it, and under no other.
        identity = c.body.get("identity")
        self.identity: str | None = identity if isinstance(identity, str) else None

    # -- the steps ----------------------------------------------------------------

    def run(self) -> None:
        self.steps()
        if self.wrote:
            failpoint("after_local_write", self.c.job_id, self.c.attempt, self.step)

    def steps(self) -> None:
        c = self.c
        failpoint("after_claim", c.job_id, c.attempt)
        # MUTANT provider_memory_only: what the ledger says took effect is not consulted.
        if c.execution_state == "succeeded" and not self.bug("provider_memory_only"):
            # Done and acknowledged once, and delivered again (the acknowledgement was
            # lost): the durable record closes it, whatever the provider still remembers.
            self.log("already_done", job=c.job_id)
            self.result("succeeded")
            return
        if self.cfg.outbox:
            self.to_outbox()
            return
        plan = c.steps or ((None, c.provider),)
        if self.bug("ack_before_effect"):
            # MUTANT ack_before_effect: the queue forgets the job before anything happened.
            self.ledger.acknowledge(c, now=time.monotonic())
        in_progress = c.side_effect_state in ("submitted", "ambiguous")
        unresolved = c.needs_reconcile or in_progress
        if self.forgets_older_attempt():
            # MUTANT upgrade_forgets_old_attempts: version 1's attempt is taken for none.
            in_progress = unresolved = False
        if self.bug("cancel_checked_only_at_first_claim") and c.attempt == 1 and self.cancelled():
            # MUTANT cancel_checked_only_at_first_claim: asked once, when first claimed.
            return
        for i, (step, provider) in enumerate(plan):
            # MUTANT restart_from_step_one: the steps already done are done again.
            if step in c.steps_done and not self.bug("restart_from_step_one"):
                continue
            self.step, self.last, self.advance = step, i == len(plan) - 1, False
            spec = self.cfg.provider(provider)
            if spec is None:
                self.log("no_provider", provider=provider)
                self.result("failed", retry_at=None, reason=f"no provider {provider!r} configured")
                return
            # MUTANT skip_reconcile_after_restart: a reclaimed job is trusted as not attempted.
            # MUTANT provider_memory_only: sent again under its key instead of looked up.
            skip = self.bug("skip_reconcile_after_restart") or self.bug("provider_memory_only")
            if unresolved and not skip:
                found = self.reconcile(spec)
                if found is not None and found.outcome == "unverified" and self.retry_anyway(found):
                    pass  # MUTANT identity_retry_anyway: on to the write, under whatever works
                elif found is None:
                    return
                elif self.close_on(found):
                    if not self.advance:
                        return
                    # The step in progress was this one: the later ones never started,
                    # unless a restore (not a crash) left the ledger knowing less.
                    unresolved = unresolved and not in_progress
                    continue
            self.write(spec)
            if not self.advance:
                return
            unresolved = False

    def done(self, ref: str | None) -> None:
        """The step in progress took effect: close the job, or go on to the next step."""
        if self.last:
            self.result("succeeded", result_ref=ref)
            return
        assert self.step is not None
        if self.ledger.complete_step(self.c, self.step, result_ref=ref, now=time.monotonic()):
            self.log("step_done", step=self.step, ref=ref)
            failpoint("after_local_write", self.c.job_id, self.c.attempt, self.step)
            self.advance = True
        else:
            self.log("lease_lost", step="complete_step")

    def to_outbox(self) -> None:
        """Outbox mode: the message goes to the outbox with the attempt's close, in one
        transaction; the relay sends it (scenarios/worker/relay.py)."""
        c = self.c
        accepted = self.ledger.write_outbox(c, outbox_id=outbox_id(c.job_id), now=time.monotonic())
        self.log("result", outcome="outboxed", accepted=accepted)
        self.wrote = accepted

    def key(self) -> str:
        c = self.c
        if self.step is not None:
            if self.bug("step_key_per_attempt"):
                # MUTANT step_key_per_attempt: the attempt number leaks into the step's key.
                return f"{idempotency_key(c.job_id, self.step)}-a{c.attempt}"
            return idempotency_key(c.job_id, self.step)
        if self.cfg.version > 1:
            return v2_key(c, forget_older=self.bug("upgrade_forgets_old_attempts"))
        if self.bug("fresh_key_per_attempt"):
            # MUTANT fresh_key_per_attempt: the attempt number leaks into the key.
            return f"{idempotency_key(c.job_id)}-a{c.attempt}"
        if self.bug("conflict_409_new_key") and (c.last_error or "").startswith("http_409"):
            # MUTANT conflict_409_new_key: after a 409 the retry picks a new key.
            return f"{idempotency_key(c.job_id)}-r{c.attempt}"
        return idempotency_key(self.c.job_id)

    def write(self, spec: ProviderSpec) -> None:
        if not self.bug("cancel_checked_only_at_first_claim") and self.cancelled():
            return
        c, key = self.c, self.key()
        marker = None if spec.kind == "idempotent" else client_marker(c.job_id, self.step)
        persist_first = not self.bug("key_persisted_after_call")
        if persist_first and not self.ledger.mark_submitted(
            c, key=key, marker=marker, now=time.monotonic()
        ):
            self.log("lease_lost", step="mark_submitted")
            return
        failpoint("before_external_call", c.job_id, c.attempt, self.step)
        # MUTANT lease_checked_only_at_claim: no look at the lease before calling out.
        if self.bug("lease_by_worker_clock"):
            if not self.lease_left_by_own_clock():
                return
        elif self.bug("done_check_instead_of_lease"):
            if self.job_already_done():
                return
        elif not self.bug("lease_checked_only_at_claim") and not self.lease_held():
            return
        body: dict[str, Any] = dict(c.body)
        if self.bug("timestamp_in_payload"):
            # MUTANT timestamp_in_payload: the payload changes with every send.
            body["requested_at"] = time.time()
        sent = self.calls.write(
            spec, body, key=key, marker=marker, token=c.token, identity=self.identity
        )
        self.log("write", key=key, kind=sent.kind, reason=sent.reason)
        failpoint("after_external_call", c.job_id, c.attempt, self.step)
        if not persist_first:
            # MUTANT key_persisted_after_call: the record of the call comes too late.
            self.ledger.mark_submitted(c, key=key, marker=marker, now=time.monotonic())
        self.settle(spec, sent)

    def cancelled(self) -> bool:
        """A cancel was requested for the job: this attempt makes no effect and the job
        ends (dead-lettered, nothing sent). Asked before each effect, so a cancel that
        came while an earlier attempt was in flight stops its retry."""
        if not self.ledger.cancel_requested(self.c.job_id):
            return False
        self.log("cancelled", job=self.c.job_id, attempt=self.c.attempt)
        self.result("failed", retry_at=None, reason="cancelled")
        return True

    def forgets_older_attempt(self) -> bool:
        """MUTANT upgrade_forgets_old_attempts: version 2 sees only attempts recorded in
        its own key format, so an older version's unknown attempt looks like none."""
        return (
            self.cfg.version > 1
            and self.bug("upgrade_forgets_old_attempts")
            and recorded_by_older(self.c)
        )

    def lease_held(self) -> bool:
        """Renew on the attempt's own connection; refuse to call out on a stale lease."""
        if self.lease.lost.is_set() or not self.lease.renew(self.ledger):
            self.log("lease_lost", step="before_external_call")
            return False
        left = self.lease.expires_at - time.monotonic()
        if left < LEASE_MARGIN * self.cfg.lease_ttl_s:
            # The renewal itself took most of the lease (a slow ledger link): too late.
            self.log("lease_lost", step="before_external_call", left_s=round(left, 4))
            return False
        return True

    def job_already_done(self) -> bool:
        """MUTANT done_check_instead_of_lease: asks the queue whether the job has ended,
        not whether this attempt still owns it, so a stale copy calls out while a newer
        copy of the job is still in flight."""
        row = next((j for j in self.ledger.jobs() if j.job_id == self.c.job_id), None)
        ended = ("acknowledged", "dead_lettered")
        done = row is not None and (row.delivery_state in ended or row.needs_review)
        if done:
            # Closed as the durable record says, like a job delivered again after it ended.
            self.log("already_done", job=self.c.job_id, step="before_external_call")
            self.result("succeeded")
        return done

    def lease_left_by_own_clock(self) -> bool:
        """MUTANT lease_by_worker_clock: the lease's end reckoned on this worker's wall
        clock, with no renewal at the ledger (no fence) before the call."""
        left = self.lease.wall_expires_at - time.time()
        if left < LEASE_MARGIN * self.cfg.lease_ttl_s:
            self.log("lease_lost", step="before_external_call", left_s=round(left, 4))
            return False
        return True

    def settle(self, spec: ProviderSpec, sent: WriteResult) -> None:
        if sent.kind == "ok":
            self.done(sent.ref)
        elif sent.kind == "failed":
            self.fail(sent.reason)
        elif sent.kind == "conflict":
            self.result("needs_review", reason=f"provider refused the payload ({sent.reason})")
        elif sent.kind == "unverified" and self.retry_anyway(sent):
            # MUTANT identity_retry_anyway: the refusal read as a passing failure.
            self.fail(sent.reason)
        elif sent.kind == "unverified":
            self.result("needs_review", reason=self.unverified(sent.reason, sent.identity_now))
        elif sent.reason == "http_409" and self.bug("conflict_409_new_key"):
            # MUTANT conflict_409_new_key: "in flight" read as "failed".
            self.fail(sent.reason)
        elif sent.reason != "http_409" and self.bug("timeout_is_failure"):
            # MUTANT timeout_is_failure: no answer read as "nothing happened".
            self.fail(sent.reason)
        else:
            if not self.result("unknown", reason=sent.reason):
                return
            found = self.reconcile(spec)
            if found is not None and not self.close_on(found):
                # not_found after our own unknown write: safe to retry under the same key,
                # as a new attempt so every attempt makes at most one write.
                self.result("retry", retry_at=self.retry_at(), reason=found.reason)

    # -- reconcile and results --------------------------------------------------------

    def reconcile(self, spec: ProviderSpec) -> Lookup | None:
        c = self.c
        return reconcile(
            c,
            spec=spec,
            key=self.key(),
            marker=client_marker(c.job_id, self.step),
            step=self.step,
            ledger=self.ledger,
            calls=self.calls,
            backoff_s=self.cfg.backoff_s,
            stopping=self.stopping,
            lease_lost=self.lease.lost,
            lookup_error_is_not_found=self.bug("lookup_error_is_not_found"),
            on_lookup=lambda f: self.log("reconcile", outcome=f.outcome, reason=f.reason),
            identity=self.identity,
        )

    def close_on(self, found: Lookup) -> bool:
        """Close the job if the lookup settles it; False when a write is safe (not_found)."""
        if found.outcome == "confirmed":
            self.done(found.ref)
            return True
        if found.outcome in ("conflict", "unqueryable"):
            self.result("needs_review", reason=f"reconcile: {found.outcome} ({found.reason})")
            return True
        if found.outcome == "unverified":
            self.result("needs_review", reason=self.unverified(found.reason, found.identity_now))
            return True
        return False

    def unverified(self, reason: str, identity_now: str | None) -> str:
        """Why a job stops on its identity: nothing is done under one that is not verified."""
        self.log("identity_unverified", identity=self.identity, now=identity_now, reason=reason)
        if identity_now is not None:
            return f"identity {self.identity!r} now acts as {identity_now!r} ({reason}); blocked"
        return f"the session of identity {self.identity!r} is not valid ({reason}); blocked"

    def retry_anyway(self, refused: Lookup | WriteResult) -> bool:
        """MUTANT identity_retry_anyway: log in again as whoever the profile holds now and
        try once more, instead of stopping. True when the mutant takes over."""
        if not self.bug("identity_retry_anyway"):
            return False
        self.identity = refused.identity_now or self.identity
        return True

    def retry_at(self) -> float | None:
        """When the next attempt may start, or None when the attempts are used up."""
        if self.cap is not None and self.c.attempt >= self.cap:
            return None
        if self.bug("retry_without_backoff"):
            # MUTANT retry_without_backoff: the next attempt may start at once.
            return time.monotonic()
        delay = min(self.cfg.backoff_s * 2.0 ** (self.c.attempt - 1), MAX_BACKOFF_S)
        return time.monotonic() + delay

    def fail(self, reason: str) -> None:
        self.result("failed", retry_at=self.retry_at(), reason=reason)

    def result(
        self,
        outcome: str,
        *,
        result_ref: str | None = None,
        retry_at: float | None = None,
        reason: str | None = None,
    ) -> bool:
        accepted = self.ledger.write_result(
            self.c,
            outcome,
            now=time.monotonic(),
            # MUTANT no_cas_on_result: the write does not check who owns the job.
            cas=not self.bug("no_cas_on_result"),
            result_ref=result_ref,
            retry_at=retry_at,
            reason=reason,
        )
        self.log("result", outcome=outcome, accepted=accepted, reason=reason)
        self.wrote = self.wrote or accepted
        return accepted
