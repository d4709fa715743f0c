"""Traceability rows and the review desk, read from each trial's ``trace`` and ``review``.

Both are lists the engine adds to a trial (docs/results.md); a document written before
them has neither, and a row of the wrong shape is left out rather than failing a report
rebuilt from an old or hand-edited file. Every value is worker or provider text: the
templates escape it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reports.model import Results, TrialRow


@dataclass(frozen=True)
class TraceRow:
    """One committed effect: who made it, under which key, and the provider's record."""

    run_id: str
    job: str | None
    provider: str | None
    attempt: int | None
    key: str | None
    external_id: str | None
    #: What the target kept for the job (None: nothing); differs from ``external_id``
    #: when the worker recorded another effect's record, or none.
    recorded_ref: str | None
    event: int | None
    effect_id: int | None = None
    #: The request that made the effect, ``METHOD /path`` (from its arrival event), and
    #: the persona of the provider it was made at (``stripe``; None: the kind's own API).
    endpoint: str | None = None
    persona: str | None = None

    @property
    def traced(self) -> bool:
        """The target kept this effect's record id (or the provider's integer id)."""
        names = {self.external_id, None if self.effect_id is None else str(self.effect_id)}
        return self.recorded_ref is not None and self.recorded_ref in names


@dataclass(frozen=True)
class ReviewRow:
    """One job that ended in needs_review, with the five things a reviewer decides on."""

    trial: TrialRow
    job: str
    key: str | None
    marker: str | None
    action: str
    at_wall: str | None
    #: Event index of the attempted write (the link into the timeline), and its time.
    at_event: int | None
    at_t: float | None
    last_error: str | None
    review_reason: str | None
    external_state: str
    provider_records: tuple[str, ...]
    attempts: int | None
    events: tuple[int, ...]


def trace_of(trial: TrialRow, run_id: str) -> tuple[TraceRow, ...]:
    """The trial's traceability rows; the run id is the trial's own after a merge."""
    run = trial.run_id or run_id
    out = []
    for row in _rows(trial.extra.get("trace")):
        out.append(
            TraceRow(
                run_id=run,
                job=_text(row.get("job")),
                provider=_text(row.get("provider")),
                attempt=_int(row.get("attempt")),
                key=_text(row.get("idempotency_key")) or _text(row.get("client_marker")),
                external_id=_text(row.get("external_id")),
                recorded_ref=_text(row.get("recorded_ref")),
                event=_index(row.get("event"), trial),
                effect_id=_int(row.get("effect_id")),
                endpoint=_endpoint(trial, _index(row.get("event"), trial)),
                persona=_persona(trial, _text(row.get("provider"))),
            )
        )
    return tuple(out)


def _endpoint(trial: TrialRow, commit: int | None) -> str | None:
    """``METHOD /path`` of the write whose commit is event ``commit``."""
    if commit is None:
        return None
    done = trial.events[commit]
    arrival = done.fields.get("arrival_id")
    for e in trial.events:
        if e.kind == "arrival" and e.source == done.source and e.fields.get("id") == arrival:
            method, path = e.fields.get("method"), e.fields.get("path")
            if isinstance(method, str) and isinstance(path, str):
                return f"{method} {path}"
    return None


def _persona(trial: TrialRow, provider: str | None) -> str | None:
    """The persona of the trial's provider (results.json ``persona``), for its rows."""
    persona = _text(trial.extra.get("persona"))
    return (
        persona if provider is not None and provider == trial.extra.get("provider_name") else None
    )


def review_of(trial: TrialRow) -> tuple[ReviewRow, ...]:
    out = []
    for row in _rows(trial.extra.get("review")):
        job = _text(row.get("job"))
        if job is None:
            continue
        at_event = _index(row.get("at_event"), trial)
        events = row.get("events")
        out.append(
            ReviewRow(
                trial=trial,
                job=job,
                key=_text(row.get("idempotency_key")),
                marker=_text(row.get("client_marker")),
                action=_text(row.get("action")) or "not recorded",
                at_wall=_text(row.get("at_wall")),
                at_event=at_event,
                at_t=trial.events[at_event].t if at_event is not None else None,
                last_error=_text(row.get("last_error")),
                review_reason=_text(row.get("review_reason")),
                external_state=_text(row.get("external_state")) or "not recorded",
                provider_records=tuple(
                    str(r) for r in (row.get("provider_records") or ()) if isinstance(r, str)
                ),
                attempts=_int(row.get("attempts")),
                events=tuple(
                    i
                    for i in (events if isinstance(events, list) else ())
                    if _index(i, trial) is not None
                ),
            )
        )
    return tuple(out)


def review_desk(results: Results) -> tuple[ReviewRow, ...]:
    """Every job of the run that ended in needs_review, trial by trial."""
    return tuple(row for trial in results.trials for row in review_of(trial))


def _rows(value: object) -> Sequence[Mapping[str, Any]]:
    if not isinstance(value, list):
        return ()
    return [r for r in value if isinstance(r, Mapping)]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _index(value: object, trial: TrialRow) -> int | None:
    i = _int(value)
    return i if i is not None and 0 <= i < len(trial.events) else None
