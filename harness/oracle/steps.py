"""Invariant 8: a multi-step job resumes at its missing step, judged from provider truth.

A multi-step job (create a ticket, then notify its owner) owes one effect per step, each
at its own provider, in order. After a crash the protocol is to find out which steps
took effect and go on from the first that did not: "retry the missing notification
rather than rolling the whole mission back" (seed 003). So once a step's effect is
committed, no write for that step may reach its provider again (not even one an
idempotent provider would replay: the worker had the means to know), and no step is
written before the step before it took effect.
"""

from __future__ import annotations

from collections import defaultdict

from harness.contract.records import Arrival, Effect
from harness.oracle.evidence import Violation, violation
from harness.oracle.facts import Record, TrialFacts


def resumes_at_missing_step(record: Record, facts: TrialFacts) -> list[Violation]:
    """8. No step is written again after it took effect, nor before the previous one did."""
    if not facts.job_steps:
        return []
    writes: dict[tuple[str, str], list[Arrival]] = defaultdict(list)
    for a in record.arrivals:
        if a.kind == "write" and a.job_id is not None:
            writes[(a.provider, a.job_id)].append(a)
    first_effect: dict[tuple[str, str], Effect] = {}
    for e in sorted(record.effects, key=lambda e: e.t_mono):
        if e.job_id is not None:
            first_effect.setdefault((e.provider, e.job_id), e)
    out = []
    for job, steps in sorted(facts.job_steps.items()):
        previous: tuple[str, Effect | None] | None = None
        for step, provider in steps:
            own = sorted(writes.get((provider, job), []), key=lambda a: a.t_mono)
            done = first_effect.get((provider, job))
            again = [a for a in own if done is not None and a.t_mono > done.t_mono]
            if done is not None and again:
                out.append(
                    violation(
                        "resumes_at_missing_step",
                        job,
                        f"write #{again[0].id} for step {step!r} of {job} reached {provider} "
                        f"after that step's effect #{done.id} was committed: recovery must "
                        "resume at the first missing step, not repeat a step that took effect",
                        record,
                        arrivals=[again[0]],
                        effects=[done],
                    )
                )
            if previous is not None and own:
                before, effect = previous
                if effect is None or own[0].t_mono < effect.t_mono:
                    why = "never took effect" if effect is None else "had taken effect"
                    out.append(
                        violation(
                            "resumes_at_missing_step",
                            job,
                            f"write #{own[0].id} for step {step!r} of {job} reached {provider} "
                            f"before step {before!r} {why}: steps run in order",
                            record,
                            arrivals=[own[0]],
                            effects=[] if effect is None else [effect],
                        )
                    )
            previous = (step, done)
    return out
