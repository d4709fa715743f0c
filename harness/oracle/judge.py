"""One judgement of a trial: its history read once, every reader handed that one record.

The runner (:func:`harness.trial_run.play`), ``crashpoint recheck``
(:func:`harness.recheck.rejudge`) and a custom scenario
(:meth:`harness.scenario_api.ScenarioTrial.check`) all call :func:`judge`, so a verdict
means the same wherever it was reached, and a stored trial judged again is judged by
the very rule that judged it fresh (Jepsen's one checker, coverage.py's one Analysis
handed to every reporter: STYLE.md).
"""

from __future__ import annotations

import gc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.contract.vocabulary import LIVENESS, Verdict
from harness.history import Event
from harness.oracle.checks import unjudged_in, violations_in
from harness.oracle.desk import review_in
from harness.oracle.evidence import Violation
from harness.oracle.facts import Record, TrialFacts, read
from harness.oracle.trace import trace_in
from harness.oracle.warn import warnings_in

#: Why a trial is inconclusive when the caller cannot say more (it knows no bound).
NOT_QUIESCENT = "no quiescence within the trial's bound"


@dataclass(frozen=True)
class Judgement:
    """What the oracle decided about one trial, and everything it read off the way."""

    verdict: Verdict
    #: Empty unless violated: an inconclusive trial's safety findings are kept only when
    #: they make it violated (liveness is never judged before quiescence).
    violations: tuple[Violation, ...] = ()
    #: Invariant -> why it (or the part its reason names) could not be judged.
    unjudged: Mapping[str, str] = field(default_factory=dict)
    #: Findings that break no invariant; none for an inconclusive trial (nothing proved).
    warnings: tuple[Violation, ...] = ()
    #: One row per committed effect (harness.oracle.trace).
    trace: tuple[dict[str, Any], ...] = ()
    #: One row per job the target left in needs_review (harness.oracle.desk).
    review: tuple[dict[str, Any], ...] = ()
    #: Why the trial is inconclusive; None otherwise.
    reason: str | None = None


def verdict_of(violations: Sequence[Violation], *, quiescent: bool) -> Verdict:
    """The one verdict rule: a safety violation is decided whatever happened; without
    quiescence nothing else is, so the trial is inconclusive, never held."""
    safety = any(v.invariant not in LIVENESS for v in violations)
    if violations and (quiescent or safety):
        return Verdict.VIOLATED
    return Verdict.HELD if quiescent else Verdict.INCONCLUSIVE


def judge(
    events: Sequence[Event],
    facts: TrialFacts,
    *,
    bound_s: float | None = None,
    quiet_s: float | None = None,
) -> Judgement:
    """``events`` (the sorted history, as results.json keeps it: violations cite it by
    index) judged with ``facts``. ``bound_s`` (the quiescence bound) and ``quiet_s``
    (the quiet window) let an inconclusive trial say what never ended."""
    # The oracle builds a record per event and keeps every one until it returns:
    # collections would find nothing to free, and on a long history they cost more
    # than the checks (a 100,000-arrival history runs over twice as fast without).
    collecting = gc.isenabled()
    gc.disable()
    try:
        record = read(events)
        violations = violations_in(record, facts)
        verdict = verdict_of(violations, quiescent=facts.quiescent)
        reason = None
        if verdict is Verdict.INCONCLUSIVE:
            reason = no_quiescence(record, facts, bound_s=bound_s, quiet_s=quiet_s)
        return Judgement(
            verdict=verdict,
            violations=tuple(violations) if verdict is Verdict.VIOLATED else (),
            unjudged=unjudged_in(record, facts),
            warnings=() if verdict is Verdict.INCONCLUSIVE else tuple(warnings_in(record, facts)),
            trace=tuple(trace_in(record, facts)),
            review=tuple(review_in(record, facts)),
            reason=reason,
        )
    finally:
        if collecting:
            gc.enable()


def no_quiescence(
    record: Record, facts: TrialFacts, *, bound_s: float | None, quiet_s: float | None
) -> str:
    """Why the trial's bound ran out: which jobs never ended, or what never went quiet."""
    if bound_s is None or quiet_s is None:
        return NOT_QUIESCENT
    bound = f"{bound_s:.0f} s"
    if facts.job_states is not None:
        states = {j.job_id: j for j in facts.job_states}
        open_jobs = [
            f"{job} ({states[job].delivery_state})" if job in states else f"{job} (no state)"
            for job in facts.jobs
            if job not in states or not states[job].final
        ]
        return f"jobs did not all end within {bound}: {', '.join(open_jobs) or 'none open'}"
    reached = {a.job_id for a in record.arrivals if a.job_id}
    silent = [job for job in facts.jobs if job not in reached]
    if silent:
        return (
            f"{', '.join(silent)} never reached a provider within {bound}, and the target "
            "reports no job outcomes to tell a lost job from a slow one: declare [target] "
            "status in crashpoint.toml"
        )
    return f"requests kept reaching the providers: never quiet for {quiet_s:.2f} s within {bound}"
