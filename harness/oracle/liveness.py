"""Invariant 5: the end state, decided only at quiescence."""

from __future__ import annotations

from collections import defaultdict

from fake_providers.models import Effect
from harness.oracle.evidence import Violation, violation
from harness.oracle.facts import Record, TrialFacts


def nothing_lost(record: Record, facts: TrialFacts) -> list[Violation]:
    """5. At quiescence every job ended: one effect, or needs_review / dead-lettered."""
    effects: dict[str, list[Effect]] = defaultdict(list)
    for e in record.effects:
        if e.job_id is not None:
            effects[e.job_id].append(e)
    ledger = facts.ledger_jobs
    finals = {j.job_id: j for j in ledger} if ledger else {}
    out = []
    for job in facts.jobs:
        n = len(effects.get(job, []))
        final = finals.get(job)
        if final is None:
            if ledger:
                out.append(
                    violation("nothing_lost", job, f"{job} is missing from the ledger", record)
                )
            elif n == 0 and job not in facts.review_expected:
                out.append(violation("nothing_lost", job, f"{job} ended with no effect", record))
            continue
        if final.delivery_state == "acknowledged" and n != 1:
            out.append(
                violation(
                    "nothing_lost",
                    job,
                    f"{job} is acknowledged but has {n} committed effects",
                    record,
                    ledger=[final],
                    effects=effects.get(job, []),
                )
            )
        elif final.needs_review or final.delivery_state in ("acknowledged", "dead_lettered"):
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
