"""One judgement: the history read once, one verdict rule, one severity order.

The runner, ``crashpoint recheck`` and custom scenarios all judge through
:func:`harness.oracle.judge`; these tests pin what it returns and that it reads the
history exactly once, whatever the trial needs (violations, notes, warnings, trace,
review rows).
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

import harness.oracle
from harness.contract.vocabulary import VERDICT_ORDER, ExitCode, Verdict, severity
from harness.oracle import (
    Judgement,
    check,
    judge,
    review_rows,
    trace_rows,
    unjudged,
    warnings_of,
)
from harness.oracle import facts as facts_module
from harness.oracle.judge import NOT_QUIESCENT
from harness.oracle.stored import facts_to_json
from harness.recheck import rejudge
from tests.unit.test_oracle import claim, done, facts, history, write

T0 = 5000.0


def _duplicate() -> list[Any]:
    """Two committed writes of one job under two keys, and a claim: no_duplicate_effect,
    a job in review (review row) and effects to trace."""
    return history(
        [write(T0 + 0.2), write(T0 + 0.6, idempotency_key="other", fencing_token="2")],
        claim(T0 + 0.1, 1, "w1"),
        claim(T0 + 0.5, 2, "w2"),
    )


def _review_facts(**kw: Any) -> Any:
    return facts(job_states=[done(needs_review=True, external_ref=None)], **kw)


def test_the_history_is_read_once_per_judgement(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = facts_module.read

    def counted(events: Any) -> Any:
        calls.append(len(events))
        return real(events)

    # Every oracle module that holds the reader by name gets the counting one.
    patched = 0
    for name, module in list(sys.modules.items()):
        if name.startswith("harness.oracle") and getattr(module, "read", None) is real:
            monkeypatch.setattr(module, "read", counted)
            patched += 1
    assert patched >= 2
    judged = judge(_duplicate(), _review_facts(max_attempts=None))
    assert judged.violations
    assert judged.trace
    assert judged.review
    assert judged.unjudged
    assert len(calls) == 1


def test_the_judgement_is_what_each_reading_gives() -> None:
    events, trial_facts = _duplicate(), _review_facts()
    judged = judge(events, trial_facts)
    assert judged.verdict is Verdict.VIOLATED
    assert list(judged.violations) == check(events, trial_facts)
    assert dict(judged.unjudged) == unjudged(events, trial_facts)
    assert list(judged.warnings) == warnings_of(events, trial_facts)
    assert list(judged.trace) == trace_rows(events, trial_facts)
    assert list(judged.review) == review_rows(events, trial_facts)
    assert judged.reason is None


def test_the_trace_names_each_effects_attempt_from_the_claim_of_its_token() -> None:
    rows = judge(_duplicate(), _review_facts()).trace
    assert [r["attempt"] for r in rows] == [1, 2]


def test_without_quiescence_only_safety_decides() -> None:
    clean = history([write(T0 + 0.2)], claim(T0 + 0.1, 1, "w1"))
    late = judge(clean, facts(job_states=[done()], quiescent=False))
    assert late == Judgement(
        Verdict.INCONCLUSIVE, unjudged={}, trace=late.trace, reason=NOT_QUIESCENT
    )
    bound = judge(
        clean,
        facts(job_states=[done(delivery_state="leased")], quiescent=False),
        bound_s=10.0,
        quiet_s=0.5,
    )
    assert bound.reason == "jobs did not all end within 10 s: j-1 (leased)"
    unsafe = judge(_duplicate(), _review_facts(quiescent=False))
    assert unsafe.verdict is Verdict.VIOLATED
    assert unsafe.reason is None


def test_an_inconclusive_trial_keeps_no_warnings() -> None:
    judged = judge(_duplicate()[:1], facts(job_states=[done(external_ref=None)], quiescent=False))
    assert judged.verdict is Verdict.INCONCLUSIVE
    assert judged.warnings == ()


def test_recheck_writes_the_whole_judgement() -> None:
    events, trial_facts = _duplicate(), _review_facts(max_attempts=None)
    trial = {
        "id": "t1",
        "provider": "idempotent",
        "verdict": "held",
        "reason": None,
        "violations": [],
        "events": [e.to_json(t0=T0) for e in events],
        "facts": facts_to_json(trial_facts, t0=T0),
    }
    new, change = rejudge(trial)
    fresh = judge(events, trial_facts)
    assert new["verdict"] == fresh.verdict == "violated"
    assert change is not None
    assert new["unjudged"] == dict(fresh.unjudged)
    assert [r["job"] for r in new["review"]] == ["j-1"]
    assert len(new["trace"]) == 2


def test_one_severity_order_speaks_for_every_merge() -> None:
    from harness.commands.matrix import worst
    from reports.model import SEVERITY

    assert [severity(v) for v in VERDICT_ORDER] == sorted(
        (severity(v) for v in Verdict), reverse=True
    )
    ranked = [s for s in sorted(SEVERITY, key=SEVERITY.__getitem__, reverse=True)]
    assert [s for s in ranked if s != "not_reached"] == [v.value for v in VERDICT_ORDER]
    assert worst(ExitCode.HELD, ExitCode.VIOLATED, ExitCode.INCONCLUSIVE) == ExitCode.VIOLATED
    assert worst(ExitCode.INCONCLUSIVE, ExitCode.HELD) == ExitCode.INCONCLUSIVE
    assert worst(ExitCode.VIOLATED, ExitCode.USAGE) == ExitCode.USAGE
    assert harness.oracle.verdict_of([], quiescent=True) is Verdict.HELD
