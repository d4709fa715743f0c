"""The words a trial that did not hold is reported in outside the HTML report: a pytest
failure, a custom scenario's verdict. Each violation with its evidence (the rows and
the timeline events the oracle decided it from), the trial page, the replay line.

Plain text from the trial's own records (``results.json`` shapes), so it reads the same
whichever process judged the trial.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.oracle import Violation

#: Rows of one kind shown per violation; the trial page has them all.
MAX_ROWS = 4
#: Cited events shown per violation.
MAX_EVENTS = 12
#: A longer field value is cut, so one arrival's body cannot flood a terminal.
MAX_VALUE = 80
ROW_KINDS = ("arrivals", "effects", "ledger")
#: Fields a line leaves out: clocks, ids and copies of what the line says already (the
#: trial page and results.json keep every field).
EVENT_HIDDEN = frozenset(
    {
        "t_mono",
        "t_wall",
        "peer_pid",
        "id",
        "job_id",
        "arrival_id",
        "effect_id",
        "path",
        "provider",
        "idempotency_key",
        "worker_id",
        "fencing_token",
    }
)
#: A row's clocks, and what the violation's line says already.
ROW_HIDDEN = frozenset({"t_mono", "t_wall", "path", "job_id", "provider"})
#: Fingerprints tell apart; their first characters do that as well as all 64.
SHORT_FIELDS = {"fingerprint": 12}


def explain(
    title: str,
    *,
    verdict: str,
    reason: str | None,
    violations: Sequence[Violation],
    events: Sequence[Mapping[str, Any]],
    page: Path | str | None = None,
    replay: str | None = None,
) -> str:
    """``title: verdict``, then every violation with its evidence, the page and replay."""
    head = f"{title}: {verdict}"
    if reason and not violations:
        head += f": {reason}"
    lines = [head]
    for v in violations:
        lines.append(f"  {v.invariant} (job {v.job or '-'}): {v.message}")
        lines += [f"    {line}" for line in evidence_lines(v, events)]
    if page is not None:
        lines.append(f"trial page: {page}")
    if replay:
        lines.append(f"replay: {replay}")
    return "\n".join(lines)


def evidence_lines(v: Violation, events: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the oracle saw for ``v``: row counts with the first rows, then its events."""
    out: list[str] = []
    for kind in ROW_KINDS:
        rows = v.evidence.get(kind)
        if rows is None:
            continue
        out.append(f"{kind}: {len(rows)}")
        out += [f"  {_row(r)}" for r in rows[:MAX_ROWS]]
        if len(rows) > MAX_ROWS:
            out.append(f"  ... and {len(rows) - MAX_ROWS} more on the trial page")
    cited = [i for i in v.events if 0 <= i < len(events)]
    if cited:
        out.append("events:")
        out += [f"  {event_line(i, events[i])}" for i in cited[:MAX_EVENTS]]
        if len(cited) > MAX_EVENTS:
            out.append(f"  ... and {len(cited) - MAX_EVENTS} more on the trial page")
    return out


def event_line(index: int, event: Mapping[str, Any]) -> str:
    """``#index t source kind job=.. attempt=.. field=..``: one timeline event."""
    parts = [f"#{index}", f"{float(event.get('t', 0.0)):.3f}s", str(event.get("source"))]
    parts.append(str(event.get("kind")))
    if event.get("job") is not None:
        parts.append(f"job={event['job']}")
    if event.get("attempt") is not None:
        parts.append(f"attempt={event['attempt']}")
    fields = event.get("fields") or {}
    parts += _fields(fields, hidden=EVENT_HIDDEN, order=sorted(fields))
    return " ".join(parts)


def _row(row: Mapping[str, Any]) -> str:
    return " ".join(_fields(row, hidden=ROW_HIDDEN, order=list(row)))


def _fields(fields: Mapping[str, Any], *, hidden: frozenset[str], order: list[str]) -> list[str]:
    return [
        f"{k}={_value(fields[k], SHORT_FIELDS.get(k, MAX_VALUE))}"
        for k in order
        if k not in hidden and fields[k] is not None
    ]


def _value(value: object, limit: int = MAX_VALUE) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
