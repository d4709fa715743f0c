"""Stored trials judged again by today's oracle, without running anything.

After an oracle change, old runs tell what would now be caught (or no longer is): each
trial's stored events and facts (``trials[].facts``) go through the one judgement a
fresh trial goes through (:func:`harness.oracle.judge`). A trial stored before facts
were kept has them rebuilt from its events (its jobs from the enqueues, its provider
from the trial), without job outcomes, so what needs those stays unjudged. A trial that
was never judged (the harness broke, a skip) keeps its verdict.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.contract.vocabulary import Verdict
from harness.history import Event
from harness.oracle import TrialFacts, judge, warning_json
from harness.oracle.stored import events_from_json, facts_from_json, start_of
from harness.results import summarize


@dataclass(frozen=True)
class Change:
    trial: str
    was: str
    now: str
    was_invariants: tuple[str, ...]
    now_invariants: tuple[str, ...]

    def describe(self) -> str:
        def said(verdict: str, invariants: Sequence[str]) -> str:
            return verdict + (f" ({', '.join(invariants)})" if invariants else "")

        return (
            f"{self.trial}: {said(self.was, self.was_invariants)} -> "
            f"{said(self.now, self.now_invariants)}"
        )


def rebuilt_facts(trial: Mapping[str, Any], events: Sequence[Event]) -> TrialFacts:
    """Facts for a trial stored without them: what its events and fields still say."""
    jobs = list(dict.fromkeys(e.job for e in events if e.kind == "enqueue" and e.job))
    name = trial.get("provider_name") or "svc"
    reason = trial.get("reason") or ""
    return TrialFacts(
        jobs=jobs,
        provider_kinds={name: trial["provider"]},
        quiescent="quiescence" not in reason and "did not all end" not in reason,
        job_providers=dict.fromkeys(jobs, name),
    )


def rejudge(trial: Mapping[str, Any]) -> tuple[dict[str, Any], Change | None]:
    """``trial`` judged again: the updated entry, and its change if the verdict moved."""
    was = str(trial["verdict"])
    new = copy.deepcopy(dict(trial))
    was_judged = was in (Verdict.HELD, Verdict.VIOLATED) or (
        was == Verdict.INCONCLUSIVE and trial.get("facts") is not None
    )
    if not was_judged or not trial.get("events"):
        new["recheck"] = {"was": was, "facts": None, "note": "never judged: kept as it was"}
        return new, None
    stored = trial.get("facts")
    try:
        events = events_from_json(trial["events"], t0=start_of(trial["events"], stored))
        facts = facts_from_json(stored) if stored is not None else rebuilt_facts(trial, events)
        judged = judge(events, facts)
    except (ValueError, KeyError, TypeError) as exc:
        # A history written by another version, or cut short: say so, change nothing.
        new["recheck"] = {"was": was, "facts": None, "note": f"cannot be judged again: {exc}"}
        return new, None
    now = judged.verdict.value
    new["verdict"] = now
    if judged.verdict is Verdict.INCONCLUSIVE:
        # The stored reason knew the trial's bound; the recheck does not.
        new["reason"] = trial.get("reason") or judged.reason
    elif was == Verdict.INCONCLUSIVE:
        new["reason"] = None
    new["violations"] = [v.to_json() for v in judged.violations]
    new["unjudged"] = dict(judged.unjudged)
    new["warnings"] = [warning_json(w) for w in judged.warnings]
    new["trace"] = list(judged.trace)
    new["review"] = list(judged.review)
    new["recheck"] = {"was": was, "facts": "stored" if stored is not None else "rebuilt"}
    was_inv = tuple(dict.fromkeys(v["invariant"] for v in trial.get("violations", [])))
    now_inv = tuple(dict.fromkeys(v.invariant for v in judged.violations))
    if (was, was_inv) == (now, now_inv):
        return new, None
    return new, Change(str(trial["id"]), was, now, was_inv, now_inv)


def rejudge_document(doc: Mapping[str, Any]) -> tuple[dict[str, Any], list[Change]]:
    """The whole results document judged again, and the trials whose verdict moved."""
    out = copy.deepcopy(dict(doc))
    changes: list[Change] = []
    trials = []
    for trial in doc["trials"]:
        new, change = rejudge(trial)
        trials.append(new)
        if change is not None:
            changes.append(change)
    out["trials"] = trials
    out["summary"] = summarize(trials)
    out["rechecked_from"] = doc.get("run_id")
    return out, changes
