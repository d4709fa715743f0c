"""The facts results.json keeps are the facts the trial was judged with, every field.

A field of :class:`TrialFacts` that is not stored is an invariant ``crashpoint recheck``
silently stops judging (``job_steps`` once dropped ``resumes_at_missing_step``). The
sample below must give every field a value other than its default, so a field added
later fails here until it is both given a value and stored.
"""

from __future__ import annotations

import dataclasses
import json

from harness.oracle import JobFinal, TrialFacts
from harness.oracle.stored import facts_from_json, facts_to_json

T0 = 5000.0


def _every_field_set() -> TrialFacts:
    final = JobFinal(
        job_id="j-0001",
        delivery_state="acknowledged",
        execution_state="succeeded",
        side_effect_state="confirmed",
        needs_review=True,
        attempts=3,
        external_ref="rec_svc_000001",
        last_error="HTTP 503",
        review_reason="unknown outcome",
        idempotency_key="k-j-0001",
    )
    return TrialFacts(
        jobs=["j-0001", "j-0002"],
        provider_kinds={"svc": "idempotent", "mail": "unqueryable"},
        job_states=[final],
        max_attempts=4,
        quiescent=False,
        review_expected=frozenset({"j-0002"}),
        job_providers={"j-0001": "svc", "j-0002": "mail"},
        last_window_from=T0 + 7.5,
        job_steps={"j-0001": (("charge", "svc"), ("receipt", "mail"))},
        sensitive_values={"secret-email-j-0001": "email"},
        min_backoff_s=0.25,
    )


def _defaults(cls: type) -> dict[str, object]:
    out: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def test_the_sample_sets_every_field_away_from_its_default() -> None:
    facts = _every_field_set()
    for cls, sample in ((TrialFacts, facts), (JobFinal, facts.job_states[0])):  # type: ignore[index]
        same = [n for n, d in _defaults(cls).items() if getattr(sample, n) == d]
        assert not same, f"give {cls.__name__}.{', '.join(same)} a non-default value here"


def test_every_field_survives_results_json() -> None:
    facts = _every_field_set()
    stored = json.loads(json.dumps(facts_to_json(facts, t0=T0)))
    back = facts_from_json(stored)
    for f in dataclasses.fields(TrialFacts):
        assert getattr(back, f.name) == getattr(facts, f.name), f"{f.name} is not stored whole"
    assert back == facts


def test_facts_stored_before_a_field_was_kept_take_its_default() -> None:
    stored = facts_to_json(_every_field_set(), t0=T0)
    del stored["job_steps"], stored["sensitive_values"], stored["min_backoff_s"]
    back = facts_from_json(stored)
    assert back.min_backoff_s is None
    assert back.job_steps == {}
    assert back.sensitive_values == {}
