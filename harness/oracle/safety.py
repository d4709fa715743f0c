"""Invariants 1, 2, 3, 6 and 7: what reached the providers, judged from their own logs.

A write's outcome is *settled* when the provider answered it with an error before
committing anything: the worker was told, in a response it could read, that nothing
happened. Every other write (committed, dropped, held, or answered with a success the
worker may never have read) leaves the attempt possibly *unknown*, and a later write for
the same job must be covered: the same idempotency key at an idempotent provider, or a
successful lookup in between at a plain one. At an unqueryable provider nothing covers it.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict

from harness.contract.records import Arrival, Effect
from harness.oracle.evidence import Violation, violation
from harness.oracle.facts import Record, TrialFacts, identity, settled


def no_duplicate_effect(record: Record, facts: TrialFacts) -> list[Violation]:
    """1. At most one committed effect per logical job per provider."""
    # Told apart first, and only the jobs counted twice gathered: most jobs have one effect.
    keys = [(e.provider, e.job_id) for e in record.effects if e.job_id is not None]
    if len(set(keys)) == len(keys):
        return []
    twice = {k for k, n in Counter(keys).items() if n > 1}
    per: dict[tuple[str, str | None], list[Effect]] = defaultdict(list)
    for e in record.effects:
        if (e.provider, e.job_id) in twice:
            per[(e.provider, e.job_id)].append(e)
    out = []
    for (provider, job), effects in sorted(per.items()):
        if len(effects) > 1:
            out.append(
                violation(
                    "no_duplicate_effect",
                    job,
                    f"{len(effects)} committed effects for {job} at {provider}",
                    record,
                    effects=effects,
                )
            )
    return out


def no_retry_while_unknown(record: Record, facts: TrialFacts) -> list[Violation]:
    """2. No write follows an unsettled write for the job unless it is covered.

    Idempotent providers: covered by carrying the same key. Plain providers: covered by a
    lookup for the job answered 200 between the two writes. Unqueryable providers are
    left to invariant 7, which owns them.
    """
    out = []
    lookups = [a for a in record.arrivals if a.kind == "lookup"]
    for (provider, job), writes in record.retried:
        kind = facts.provider_kinds.get(provider, "plain")
        if kind == "unqueryable":
            continue
        for earlier, later in itertools.pairwise(writes):
            if settled(earlier):
                continue
            if kind == "idempotent":
                if later.idempotency_key == earlier.idempotency_key:
                    continue
                why = (
                    f"write #{later.id} for {job} used key {later.idempotency_key!r} while "
                    f"write #{earlier.id} under key {earlier.idempotency_key!r} was unknown"
                )
            else:
                covering = [
                    lk
                    for lk in lookups
                    if lk.provider == provider
                    and lk.status == 200
                    and earlier.t_mono < lk.t_mono < later.t_mono
                    and (lk.job_id == job or lk.client_marker == earlier.client_marker)
                ]
                if covering:
                    continue
                why = (
                    f"write #{later.id} for {job} was sent after write #{earlier.id} "
                    f"(status {earlier.status}, committed={earlier.committed}) with no "
                    "successful lookup in between"
                )
            out.append(
                violation("no_retry_while_unknown", job, why, record, arrivals=[earlier, later])
            )
    return out


def stable_key_and_payload(record: Record, facts: TrialFacts) -> list[Violation]:
    """3. Every write of one logical job carries one key (or marker) and one fingerprint."""
    out = []
    for (provider, job), writes in record.retried:  # one write: one key, one fingerprint
        identities = {identity(w) for w in writes}
        prints = {w.fingerprint for w in writes}
        if len(identities) > 1:
            out.append(
                violation(
                    "stable_key_and_payload",
                    job,
                    f"{len(identities)} different keys or markers for {job} at {provider}: "
                    f"{sorted(str(i) for i in identities)}",
                    record,
                    arrivals=writes,
                )
            )
        if len(prints) > 1:
            out.append(
                violation(
                    "stable_key_and_payload",
                    job,
                    f"{len(prints)} different payload fingerprints for {job} at {provider}",
                    record,
                    arrivals=writes,
                )
            )
    return out


def bounded_retries(record: Record, facts: TrialFacts) -> list[Violation]:
    """6. Writes never exceed the maximum the target declares; without one, retries stop.

    Only writes count, and only as the provider received them: its log is the ground
    truth. Lookups, claims that wrote nothing and the worker's own attempt counter are
    context, never evidence of a retry: a worker that counts claims counts every
    reconcile of an unknown outcome too, which is exactly what it should do, and a
    claim-counting worker was flagged for it (the job's counter now rides along in a
    writes violation's evidence instead).

    With no declared maximum there is no figure to hold writes to (the reference
    worker's would be borrowed, and a correct worker with a larger cap would fail), so
    the only violation is a job still being written to in the last quiet window before
    the trial's bound ran out.
    """
    limit = facts.max_attempts
    if limit is None:
        return _retries_stop(record, facts)
    out = []
    # A job written once is past no cap of one or more.
    for (provider, job), every in record.retried if limit >= 1 else record.writes:
        if len(every) <= limit:
            continue  # no consumer's share can be past the cap: most jobs end here
        # Each consumer of a job delivered twice is held to its own cap, and so is each
        # span between ledger restores: a restore brings back a job's state from before
        # its attempts, and a correct worker that counts them in its ledger starts over.
        by_consumer: dict[tuple[int, int], list[Arrival]] = defaultdict(list)
        for w in every:
            by_consumer[(record.consumer(w.worker_id), record.restores_before(w))].append(w)
        for (consumer, restored), writes in sorted(by_consumer.items()):
            if len(writes) > limit:
                of = "" if consumer == 1 else f" from consumer {consumer}"
                if restored:
                    of += f" after ledger restore {restored}"
                out.append(
                    violation(
                        "bounded_retries",
                        job,
                        f"{len(writes)} writes{of} for {job} reached {provider}; "
                        f"the maximum is {limit}",
                        record,
                        arrivals=writes,
                        # The worker's own count, as context beside the provider's.
                        ledger=[j for j in facts.job_states or () if j.job_id == job] or None,
                    )
                )
    return out


def _retries_stop(record: Record, facts: TrialFacts) -> list[Violation]:
    since = facts.last_window_from
    if since is None:
        return []
    out = []
    for (provider, job), writes in record.writes:
        late = [w for w in writes if w.t_mono >= since]
        if late:
            out.append(
                violation(
                    "bounded_retries",
                    job,
                    f"retries did not stop: {len(writes)} writes for {job} reached {provider}, "
                    f"{len(late)} of them in the trial's last quiet window, and the target "
                    "declares no max_attempts",
                    record,
                    arrivals=writes,
                )
            )
    return out


def ambiguity_goes_to_review(record: Record, facts: TrialFacts) -> list[Violation]:
    """7. An unknown that cannot be reconciled is never replayed, and ends in review."""
    out = []
    for (provider, job), writes in record.retried:
        if facts.provider_kinds.get(provider) != "unqueryable":
            continue
        for earlier, later in itertools.pairwise(writes):
            if not settled(earlier):
                out.append(
                    violation(
                        "ambiguity_goes_to_review",
                        job,
                        f"write #{later.id} for {job} replayed an unknown write #{earlier.id} "
                        f"at unqueryable {provider}",
                        record,
                        arrivals=[earlier, later],
                    )
                )
                break
    if facts.job_states is not None and facts.quiescent:
        for j in facts.job_states:
            if j.job_id in facts.review_expected and not j.needs_review:
                out.append(
                    violation(
                        "ambiguity_goes_to_review",
                        j.job_id,
                        f"{j.job_id} could only be protected by review but ended "
                        f"{j.delivery_state}/{j.execution_state}",
                        record,
                        ledger=[j],
                    )
                )
    return out
