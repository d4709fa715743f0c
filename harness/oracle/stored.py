"""The oracle's inputs as results.json keeps them, and read back: the events (times
relative to the trial's start) and :class:`TrialFacts` (``trials[].facts``), so a stored
trial can be judged again without running anything (``crashpoint recheck``).

Event times are stored relative to the trial's start, but the rows that provider events
carry keep their own monotonic times (``t_mono``), and the invariants compare the two:
the facts keep the start (``t0``), and reading adds it back. A trial stored without it
has it found again from any event whose row carries ``t_mono``.

Every field of :class:`TrialFacts` is kept: a field left out is an invariant a recheck
silently stops judging (``tests/unit/test_stored_facts.py`` fails on one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from harness.history import Event
from harness.oracle.facts import JobFinal, TrialFacts


def facts_to_json(facts: TrialFacts, *, t0: float = 0.0) -> dict[str, Any]:
    """``facts`` as JSON; its one moment is made relative to ``t0``, as the events are."""
    return {
        "jobs": list(facts.jobs),
        "provider_kinds": dict(facts.provider_kinds),
        "job_states": None if facts.job_states is None else [asdict(j) for j in facts.job_states],
        "max_attempts": facts.max_attempts,
        "quiescent": facts.quiescent,
        "review_expected": sorted(facts.review_expected),
        "job_providers": dict(facts.job_providers),
        "t0": t0,
        "last_window_from": None
        if facts.last_window_from is None
        else round(facts.last_window_from - t0, 6),
        "job_steps": {
            job: [[step, provider] for step, provider in steps]
            for job, steps in facts.job_steps.items()
        },
        "sensitive_values": dict(facts.sensitive_values),
        "min_backoff_s": facts.min_backoff_s,
    }


def facts_from_json(doc: Mapping[str, Any]) -> TrialFacts:
    """Facts stored by :func:`facts_to_json`; a field stored before it was kept takes
    its default."""
    states = doc.get("job_states")
    t0 = float(doc.get("t0") or 0.0)
    window = doc.get("last_window_from")
    return TrialFacts(
        jobs=list(doc["jobs"]),
        provider_kinds=dict(doc["provider_kinds"]),
        job_states=None if states is None else [JobFinal(**j) for j in states],
        max_attempts=doc.get("max_attempts"),
        quiescent=bool(doc.get("quiescent", True)),
        review_expected=frozenset(doc.get("review_expected", ())),
        job_providers=dict(doc.get("job_providers", {})),
        last_window_from=None if window is None else float(window) + t0,
        job_steps={
            str(job): tuple((str(step), str(provider)) for step, provider in steps)
            for job, steps in (doc.get("job_steps") or {}).items()
        },
        sensitive_values=dict(doc.get("sensitive_values") or {}),
        min_backoff_s=doc.get("min_backoff_s"),
    )


def start_of(events: Sequence[Mapping[str, Any]], facts: Mapping[str, Any] | None) -> float:
    """The trial's start on the monotonic clock: stored, or found from a provider row."""
    if facts is not None and facts.get("t0") is not None:
        return float(facts["t0"])
    for e in events:
        t_mono = (e.get("fields") or {}).get("t_mono")
        if isinstance(t_mono, int | float) and e.get("kind") in ("arrival", "reconcile"):
            return float(t_mono) - float(e["t"])
    return 0.0


def events_from_json(events: Sequence[Mapping[str, Any]], *, t0: float = 0.0) -> list[Event]:
    """The stored events, in their stored order (the order violations cite), on the
    monotonic clock again (``t0``: :func:`start_of`)."""
    return [
        Event(
            t=float(e["t"]) + t0,
            source=str(e["source"]),
            kind=str(e["kind"]),
            job=e.get("job"),
            attempt=e.get("attempt"),
            fields=dict(e.get("fields") or {}),
        )
        for e in events
    ]
