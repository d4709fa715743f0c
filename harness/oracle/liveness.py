"""Invariant 5: the end state, decided only at quiescence, from the jobs' reported states.

Provider truth alone cannot tell a lost job from one a correct worker dead-lettered or
sent to review (neither has an effect): without job states from the target, nothing is
decided here, and :func:`harness.oracle.unjudged` says so in the trial's record.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from harness.contract.records import Effect
from harness.oracle.evidence import Violation, violation
from harness.oracle.facts import JobFinal, Record, TrialFacts


def nothing_lost(record: Record, facts: TrialFacts) -> list[Violation]:
    """5. At quiescence every job ended: one effect, or needs_review / dead-lettered."""
    states = facts.job_states
    if states is None:
        return []
    # Indexed once (a scan of every arrival for every job is quadratic in the history),
    # and by the first effect and the first provider written to: most jobs of a long
    # history have one of each, and a list or set per job cost more than the checks.
    first: dict[str, Effect] = {}
    effects: dict[str, list[Effect]] = {}  # only the jobs with more than one
    for e in record.effects:
        if e.job_id is None:
            continue
        if e.job_id in first:
            effects.setdefault(e.job_id, [first[e.job_id]]).append(e)
        else:
            first[e.job_id] = e
    wrote: dict[str | None, str] = {}
    written: dict[str | None, set[str]] = {}  # only the jobs written to at two or more
    for a in record.arrivals:
        if a.kind == "write" and wrote.setdefault(a.job_id, a.provider) != a.provider:
            written.setdefault(a.job_id, {wrote[a.job_id]}).add(a.provider)
    finals = {j.job_id: j for j in states}
    # The jobs that are not decided by the test below: few, and each looked at in full.
    involved = effects.keys() | written.keys() | facts.job_steps.keys()
    routed = facts.job_providers
    out = []
    for job in facts.jobs:
        one = first.get(job)
        if (
            one is not None
            and wrote.get(job, one.provider) == one.provider
            and routed.get(job, one.provider) == one.provider
            and job not in involved
            and job in finals
            and finals[job].delivery_state == "acknowledged"
        ):
            # Most jobs of a long history, decided without counting: one effect, at the
            # only provider the job owes one (it wrote to no other, was routed to none).
            continue
        lost = _lost(job, finals.get(job), one, effects, wrote, written, record, facts)
        if lost is not None:
            out.append(lost)
    return out


def _lost(
    job: str,
    final: JobFinal | None,
    one: Effect | None,
    effects: Mapping[str, list[Effect]],
    wrote: Mapping[str | None, str],
    written: Mapping[str | None, set[str]],
    record: Record,
    facts: TrialFacts,
) -> Violation | None:
    """The one job the fast path could not decide, looked at in full."""
    if final is None:
        return violation("nothing_lost", job, f"the target reports no state for {job}", record)
    made = effects.get(job) or ([one] if one is not None else [])
    to = written.get(job) or ({wrote[job]} if job in wrote else set())
    # A job's duty is one effect at the provider it was routed to, and one at each
    # other provider it wrote to in the same flow (a charge, then a receipt): a job
    # closed as done after a refused second call is lost all the same.
    per = Counter(e.provider for e in made)
    owed = to | set(per)
    if job in facts.job_providers:
        owed.add(facts.job_providers[job])
    # A multi-step job owes every step's effect, written or not.
    owed.update(provider for _, provider in facts.job_steps.get(job, ()))
    wrong = {p: per[p] for p in sorted(owed) if per[p] != 1}
    if final.delivery_state == "acknowledged" and (wrong or not owed):
        counts = ", ".join(f"{n} at {p}" for p, n in wrong.items()) or "none anywhere"
        return violation(
            "nothing_lost",
            job,
            f"{job} is acknowledged but its committed effects are {counts}; "
            "one is owed at each provider it wrote to",
            record,
            ledger=[final],
            effects=made,
        )
    if final.final:
        return None
    return violation(
        "nothing_lost",
        job,
        f"{job} ended {final.delivery_state}/{final.execution_state}: neither "
        "completed, dead-lettered nor in needs_review",
        record,
        ledger=[final],
    )
