"""An exploration's results as rows for rendering: the schedules tried, each shrunk
finding (one per kind of failure) drawn on its trial's timeline, and the flaky findings
apart.

``crashpoint explore`` writes them under ``exploration`` in results.json (kept by the
reader as an extra key); each schedule names the trials that ran it, and a finding's
faults are noted in its trial's history (``schedule fault N: ...``), so its timeline
shows where each fault landed: those notes are the marks drawn out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reports.model import Results, TrialRow
from reports.timeline import Timeline, layout


@dataclass(frozen=True)
class ScheduleRow:
    index: int
    phase: str
    status: str
    reproduced: str
    describe: str
    invariants: tuple[str, ...]
    faults: tuple[str, ...]
    size: str
    #: The first trial that ran it (a link), if these results hold it.
    href: str | None


@dataclass(frozen=True)
class FindingView:
    row: ScheduleRow
    file: str | None
    replay: str | None
    regression_test: str | None
    shrunk_from: ScheduleRow | None
    timeline: Timeline | None
    stem: str
    trial_id: str | None


@dataclass(frozen=True)
class ExplorationView:
    mode: str
    budget: int | None
    seed: int | None
    confirm: str | None
    command: str | None
    examples_needed: int | None
    trials_run: int | None
    trials_to_detection: int | None
    schedules: tuple[ScheduleRow, ...]
    #: The first finding (``finding.json``); ``findings`` holds it and one per other kind
    #: of failure (the set of invariants broken).
    finding: FindingView | None
    flaky: tuple[FindingView, ...]
    findings: tuple[FindingView, ...] = ()

    def count(self, status: str) -> int:
        return sum(1 for s in self.schedules if s.status == status)


def build_exploration(results: Results, link: Callable[[TrialRow], str]) -> ExplorationView | None:
    """The exploration of ``results``, or None when the run explored nothing."""
    doc = results.extra.get("exploration")
    if not isinstance(doc, Mapping):
        return None
    by_id = {t.id: t for t in results.trials}

    def first_trial(s: Mapping[str, Any]) -> TrialRow | None:
        for trial_id in s.get("trials") or ():
            if trial_id in by_id:
                return by_id[trial_id]
        return None

    def row(s: Mapping[str, Any]) -> ScheduleRow:
        trial = first_trial(s)
        size = s.get("size") or {}
        return ScheduleRow(
            index=int(s.get("index", 0)),
            phase=str(s.get("phase", "")),
            status=str(s.get("status", "")),
            reproduced=str(s.get("reproduced", "")),
            describe=str(s.get("describe", "")),
            invariants=tuple(str(i) for i in s.get("invariants") or ()),
            faults=_faults(s),
            size=f"{size.get('faults', '?')} fault(s), {size.get('jobs', '?')} job(s)",
            href=None if trial is None else link(trial),
        )

    def finding(s: Mapping[str, Any], stem: str) -> FindingView:
        trial = first_trial(s)
        timeline = None
        if trial is not None:
            # The schedule's own notes and the violation's evidence stand out.
            marked = {
                i for i, e in enumerate(trial.events) if e.kind == "note" and "fault" in e.fields
            }
            marked |= {i for v in trial.violations for i in v.evidence.events}
            timeline = layout(trial, frozenset(marked))
        shrunk = s.get("shrunk_from")
        return FindingView(
            row=row(s),
            file=_opt_str(s.get("file")),
            replay=_opt_str(s.get("replay")),
            regression_test=_opt_str(s.get("regression_test")),
            shrunk_from=row(shrunk) if isinstance(shrunk, Mapping) else None,
            timeline=timeline,
            stem=stem,
            trial_id=None if trial is None else trial.id,
        )

    found = doc.get("finding")
    # Every kind of failure its own finding; a record from before `findings` has one.
    each = [s for s in doc.get("findings") or [found] if isinstance(s, Mapping)]
    findings = tuple(
        finding(s, "finding" if n == 1 else f"finding-{n}") for n, s in enumerate(each, 1)
    )
    return ExplorationView(
        mode=str(doc.get("mode", "")),
        budget=doc.get("budget"),
        seed=doc.get("seed"),
        confirm=_opt_str(doc.get("confirm")),
        command=_opt_str(doc.get("command")),
        examples_needed=doc.get("examples_needed"),
        trials_run=doc.get("trials_run"),
        trials_to_detection=doc.get("trials_to_detection"),
        schedules=tuple(row(s) for s in doc.get("schedules") or () if isinstance(s, Mapping)),
        finding=findings[0] if findings else None,
        flaky=tuple(
            finding(s, f"flaky-{n}")
            for n, s in enumerate(doc.get("flaky") or (), 1)
            if isinstance(s, Mapping)
        ),
        findings=findings,
    )


def _faults(s: Mapping[str, Any]) -> tuple[str, ...]:
    """One line per fault of the stored schedule, in its order."""
    schedule = s.get("schedule") or {}
    out = []
    for f in schedule.get("faults") or ():
        if not isinstance(f, Mapping):
            continue
        extra = ", ".join(f"{k}={v}" for k, v in f.items() if k not in ("at", "hit", "action"))
        out.append(
            f"{f.get('action')} at {f.get('at')} (hit {f.get('hit', 1)})"
            + (f": {extra}" if extra else "")
        )
    return tuple(out)


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)
