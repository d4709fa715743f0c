"""Invariant 5: the end state, decided only at quiescence, from the jobs' reported states.

Provider truth alone cannot tell a lost job from one a correct worker dead-lettered or
sent to review (neither has an effect): without job states from the target, nothing is
decided here, and :func:`harness.oracle.unjudged` says so in the trial's record.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from fake_providers.models import Effect
from harness.oracle.evidence import Violation, violation
from harness.oracle.facts import Record, TrialFacts


def nothing_lost(record: Record, facts: TrialFacts) -> list[Violation]:
    """5. At quiescence every job ended: one effect, or needs_review / dead-lettered."""
    states = facts.job_states
    if states is None:
        return []
    effects: dict[str, list[Effect]] = defaultdict(list)
    for e in record.effects:
        # A job's duty is one effect at the provider it was routed to; effects it makes
        # at other providers in the same flow are no_duplicate_effect's to judge.
        own = facts.job_providers.get(e.job_id) if e.job_id is not None else None
        if e.job_id is not None and own in (None, e.provider):
            effects[e.job_id].append(e)
    finals = {j.job_id: j for j in states}
    out = []
    for job in facts.jobs:
        # One effect at each provider the job wrote to (a job may call several).
        per = Counter(e.provider for e in effects.get(job, []))
        sent = {a.provider for a in record.arrivals if a.job_id == job and a.kind == "write"}
        n = sum(per.values())
        final = finals.get(job)
        if final is None:
            out.append(
                violation("nothing_lost", job, f"the target reports no state for {job}", record)
            )
            continue
        if final.delivery_state == "acknowledged" and (
            not n or {per[p] for p in sent | set(per)} != {1}
        ):
            out.append(
                violation(
                    "nothing_lost",
                    job,
                    f"{job} is acknowledged but has {n} committed effects"
                    + (f" at {facts.job_providers[job]}" if job in facts.job_providers else ""),
                    record,
                    ledger=[final],
                    effects=effects.get(job, []),
                )
            )
        elif final.final:
            continue
        else:
            out.append(
                violation(
                    "nothing_lost",
                    job,
                    f"{job} ended {final.delivery_state}/{final.execution_state}: neither "
                    "completed, dead-lettered nor in needs_review",
                    record,
                    ledger=[final],
                )
            )
    return out
