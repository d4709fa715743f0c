"""The rules of ``sarif.json``: one per invariant, what it demands and how a worker
recovers without breaking it (the advice of the design's seed documents: a stable key,
a ledger that knows what is unknown, reconcile before retrying, review when unsure).
"""

from __future__ import annotations

from collections.abc import Mapping

#: invariant -> (what it demands, in one sentence; how a worker keeps it).
RULES: Mapping[str, tuple[str, str]] = {
    "no_duplicate_effect": (
        "A job causes at most one side effect at each provider, however often it is retried.",
        "Derive one idempotency key from the logical job (never from the attempt), store "
        "it before the external call, and send the same key on every retry; where the "
        "provider has no key, query it by your own marker before calling again.",
    ),
    "no_retry_while_unknown": (
        "No retry may create a new side effect while the previous attempt's outcome is unknown.",
        "Record the attempt as submitted before the call; after a crash or timeout, "
        "reconcile (look the effect up by key or marker) before retrying, and send the "
        "job to review when the provider cannot be asked.",
    ),
    "stable_key_and_payload": (
        "Every attempt at a job sends the same idempotency key and the same payload.",
        "Compute the key and the request body from the job's stored input, not from the "
        "attempt, the clock or a fresh model answer; store the body with the key and "
        "resend it unchanged.",
    ),
    "fenced_writes": (
        "A worker whose lease was taken over writes nothing more for that job.",
        "Carry the lease's fencing token into every write and check it where the write "
        "lands (a conditional update, the provider's key); a stale holder's write must "
        "be refused, not merged.",
    ),
    "nothing_lost": (
        "Every job ends done, dead-lettered or on the review desk; none is dropped.",
        "Acknowledge the delivery only after the ledger records the outcome, and let an "
        "expired lease put the job back in the queue; never close a job without its "
        "effect or a recorded reason.",
    ),
    "bounded_retries": (
        "A job is written to a provider at most the declared number of times.",
        "Cap the attempts in the ledger (not in memory, which a crash forgets) and move "
        "the job to the dead-letter queue or review once the cap is reached.",
    ),
    "ambiguity_goes_to_review": (
        "An outcome that cannot be proven either way goes to review, not to a blind retry.",
        "When the provider offers no lookup and the call's result is unknown, mark the "
        "job needs_review with its key, the attempted action, the error and the last "
        "known state, and stop automatic retries.",
    ),
    "resumes_at_missing_step": (
        "A multi-step job resumes at the first step that did not take effect.",
        "Record each step's effect in the ledger as it commits; on recovery skip the "
        "steps already confirmed and reconcile the one in doubt before going on.",
    ),
    "identity_bound": (
        "Every action for a job acts under the job's own, verified identity.",
        "Load the job's identity from its stored record at each attempt and pass it to "
        "every call; never reuse a worker-wide or previous job's credentials.",
    ),
    "no_effect_after_cancel": (
        "No write of a cancelled job reaches a provider after the cancel was acknowledged.",
        "Check for a cancel before each effect, not only when the job is first claimed; "
        "the write already in flight may land, a retry after the cancel must not go out.",
    ),
    "min_backoff": (
        "A refused write is retried no sooner than the declared least backoff.",
        "Keep the time of the refusal in the ledger and schedule the retry from it, "
        "honouring the provider's Retry-After; a restart must not reset the wait.",
    ),
}

#: For a trial that violated without naming an invariant (an older or hand-made record).
UNNAMED = "violated"


def rule_text(invariant: str) -> tuple[str, str]:
    """What ``invariant`` demands and the recovery advice; a generic line for one the
    table does not know (a newer oracle's invariant read by an older report)."""
    return RULES.get(
        invariant,
        (
            f"The invariant {invariant} was violated.",
            "See the trial's evidence and replay line; docs/results.md names every invariant.",
        ),
    )
