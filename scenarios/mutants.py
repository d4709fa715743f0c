"""Deliberately broken variants of the reference worker (and its outbox relay).

Each is one flag (``CRASHPOINT_MUTANT=<name>``) checked by the worker at the exact place
the bug lives, and each is a bug seen in real queues and agent runtimes. ``crashpoint
selftest`` runs every one: the harness is only as good as the mutants it kills.
"""

from __future__ import annotations

from typing import NamedTuple

# The oracle owns the invariants' names; a mutant only points at one of them.
from harness.contract.vocabulary import INVARIANTS


class Mutant(NamedTuple):
    name: str
    #: What the worker does wrong, in one line.
    bug: str
    #: The scenario (a row of the injection table) that exposes it.
    exposed_by: str
    #: The oracle invariant expected to catch it.
    invariant: str
    #: The provider kind that shows the bug most directly.
    provider: str = "idempotent"

    def checked(self) -> Mutant:
        """This mutant, once its invariant is known to the oracle (ValueError if not)."""
        if self.invariant not in INVARIANTS:
            raise ValueError(
                f"Mutant invariant={self.invariant!r} is unknown; use one of {INVARIANTS}"
            )
        return self


MUTANTS: dict[str, Mutant] = {
    m.name: m.checked()
    for m in (
        Mutant(
            "fresh_key_per_attempt",
            "derives the idempotency key from the attempt, so a retry after a lost response "
            "looks new to the provider and creates a second effect",
            "crash_after_external_success",
            "stable_key_and_payload",
        ),
        Mutant(
            "key_persisted_after_call",
            "writes the key and `submitted` only after the call returns; a crash in between "
            "leaves no trace, so the next attempt writes again without reconciling",
            "crash_after_external_success",
            "no_retry_while_unknown",
            provider="plain",
        ),
        Mutant(
            "timeout_is_failure",
            "treats a timeout or reset as a clean failure and retries without reconciling",
            "ambiguous_timeout",
            "no_retry_while_unknown",
            provider="plain",
        ),
        Mutant(
            "no_cas_on_result",
            "writes the result by job id alone, so a stale owner's late write is accepted",
            "lease_expiry_slow_worker",
            "fenced_writes",
        ),
        Mutant(
            "renew_without_owner_check",
            "renews the lease by job id alone and re-asserts its own token, so a worker whose "
            "lease was taken over steals it back and calls out under the stale token",
            "lease_expiry_slow_worker",
            "fenced_writes",
            provider="plain",
        ),
        Mutant(
            "lease_checked_only_at_claim",
            "checks the lease at claim time only; a paused worker resumes after its lease "
            "expired and still calls out under a stale token",
            "lease_expiry_slow_worker",
            "fenced_writes",
            provider="plain",
        ),
        Mutant(
            "skip_reconcile_after_restart",
            "ignores CRASHPOINT_RECOVERY and the submitted state of a reclaimed job, so after "
            "a restart or restore it writes again without looking",
            "state_store_restore",
            "no_retry_while_unknown",
            provider="plain",
        ),
        Mutant(
            "lookup_error_is_not_found",
            "reads a failed reconcile lookup (5xx, connection error) as not_found and writes again",
            "provider_down_during_reconcile",
            "no_duplicate_effect",
            provider="plain",
        ),
        Mutant(
            "conflict_409_new_key",
            "treats 409 (same key in flight) as a failure and retries under a new key",
            "duplicate_delivery",
            "no_duplicate_effect",
        ),
        Mutant(
            "timestamp_in_payload",
            "puts the send time into the body, so every retry carries a different fingerprint",
            "provider_error_before_commit",
            "stable_key_and_payload",
        ),
        Mutant(
            "uncapped_retries",
            "retries clean failures forever instead of dead-lettering after MAX_ATTEMPTS",
            "provider_error_before_commit",
            "bounded_retries",
        ),
        Mutant(
            "ack_before_effect",
            "acknowledges delivery right after the claim, so a crash before the effect loses "
            "the job: acknowledged, never retried, no effect",
            "crash_before_external_call",
            "nothing_lost",
        ),
        Mutant(
            "relay_without_key",
            "the outbox relay sends each message under a fresh key instead of its outbox id, "
            "so the resend after a relay crash is a new message to the provider",
            "relay_crash_after_send",
            "no_duplicate_effect",
        ),
        Mutant(
            "restart_from_step_one",
            "restarts a multi-step job from its first step on every attempt, ignoring the "
            "steps its ledger records as done, so a crash after the ticket was created sends "
            "the ticket again instead of only the missing notification",
            "multi_step_job",
            "resumes_at_missing_step",
        ),
        Mutant(
            "step_key_per_attempt",
            "derives each step's idempotency key from the attempt, so a retry after a lost "
            "response at a step looks new to the provider and that step takes effect twice",
            "multi_step_job",
            "no_duplicate_effect",
        ),
        Mutant(
            "provider_memory_only",
            "keeps no durable record of what took effect and leans on the provider's "
            "idempotency key alone: a job that comes again is sent again, and once the "
            "provider has forgotten the key that is a second effect",
            "key_retention",
            "no_duplicate_effect",
        ),
        Mutant(
            "lease_by_worker_clock",
            "reckons its lease's end on its own wall clock and calls out without renewing at "
            "the ledger (no fence), so a clock stepped back past the lease still shows time "
            "left and the call goes out under a stale token",
            "clock_skew",
            "fenced_writes",
            provider="plain",
        ),
        Mutant(
            "identity_retry_anyway",
            "finds on recovery that the job's login expired or its profile now holds another "
            "account, and tries once more anyway: under the new account, or the expired one",
            "identity_lost_on_recovery",
            "identity_bound",
        ),
        Mutant(
            "retry_without_backoff",
            "retries a refused write as soon as it can claim the job again, with no backoff: "
            "within its cap, a burst of writes at a provider that is already failing",
            "retry_backoff",
            "min_backoff",
        ),
        Mutant(
            "done_check_instead_of_lease",
            "before calling out asks whether the job has already ended (a status read, the "
            "usual guard in a long task) instead of whether its own lease still holds: a "
            "stale copy woken while a newer copy is in flight calls out under a stale token",
            "redelivery_storm",
            "fenced_writes",
            provider="plain",
        ),
        Mutant(
            "ack_when_child_lost",
            "in pool mode, acknowledges the job when the child process running its attempt "
            "dies (a prefork pool whose lost child's task is acked anyway): acknowledged, "
            "never retried, no effect",
            "child_killed",
            "nothing_lost",
        ),
        Mutant(
            "upgrade_forgets_old_attempts",
            "version 2 of the worker recognises only attempts recorded in its own key "
            "format: version 1's unknown attempt looks like none, and the job is written "
            "again under a version 2 key",
            "upgrade_during_recovery",
            "no_duplicate_effect",
        ),
        Mutant(
            "cancel_checked_only_at_first_claim",
            "asks whether the job was cancelled once, when it is first claimed, never "
            "before a retry: a cancel that came while the first attempt was in flight "
            "does not stop the retry's effect",
            "cancel_in_flight",
            "no_effect_after_cancel",
        ),
    )
}
