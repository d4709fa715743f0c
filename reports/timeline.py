"""Layout of the Jepsen-style timeline: one lane per source, events placed in ms.

Only geometry and labels are computed here; the template draws them as inline SVG so
Jinja2's autoescaping covers every string that came from a worker or provider.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.contract.vocabulary import EventKind
from reports.axis import Break, Tick, build_axis
from reports.model import TimelineEvent, TrialRow

LANE_H = 52
#: Lane labels get between these widths (px); longer sources are shortened with "…"
#: (the full name stays in the lane's tooltip).
MIN_LABEL_W = 96
MAX_LABEL_CHARS = 26
LANE_CHAR_W = 7.4
PLOT_W = 1100
TOP = 30
BOTTOM = 20
#: Least room (px) between two labels of one row of a lane.
LABEL_GAP = 6.0
#: Advance widths (px) of DejaVu Sans at the labels' 10px, regular and bold (an evidence
#: mark's label): the widest face of the SVG's font stack, measured in Chromium. A guess
#: of 5.8 px a character let labels of events close in time overlap (``commit`` is 38 px).
_LABEL_CHARS = "abcdefghijklmnopqrstuvwxyz_-.:0123456789"
_REGULAR_W = (
    6.13, 6.35, 5.5, 6.35, 6.15, 3.45, 6.35, 6.34, 2.78, 2.78, 5.79, 2.78, 9.74,
    6.34, 6.12, 6.35, 6.35, 3.94, 5.21, 3.92, 6.34, 5.92, 8.18, 5.92, 5.92, 5.25,
    5.0, 3.61, 3.18, 3.37,
)  # fmt: skip
_BOLD_W = (
    6.75, 7.16, 5.93, 7.16, 6.78, 4.05, 7.16, 7.12, 3.43, 3.43, 6.65, 3.43, 10.42,
    7.12, 6.87, 7.16, 7.16, 4.93, 5.95, 4.78, 7.12, 6.52, 9.24, 6.45, 6.52, 5.82,
    5.0, 4.15, 3.8, 4.0,
)  # fmt: skip
_DIGIT_W = {False: 6.36, True: 6.96}
#: Any other character (capitals, non-ASCII) is given the widest lower-case one's room.
_OTHER_W = {False: 10.0, True: 11.1}
_CHAR_W = {
    bold: dict(zip(_LABEL_CHARS, [*widths, *[_DIGIT_W[bold]] * 10], strict=True))
    for bold, widths in ((False, _REGULAR_W), (True, _BOLD_W))
}


def label_width(text: str, *, bold: bool = False) -> float:
    """The room (px) a mark's label takes: never less than the browser draws it in."""
    widths = _CHAR_W[bold]
    return sum(widths.get(ch, _OTHER_W[bold]) for ch in text)


#: Kind -> legend group. Colour follows the group; the outcome is drawn as the stroke.
K = EventKind
KIND_GROUPS: dict[str, str] = {
    K.WORKER_START: "lifecycle",
    K.WORKER_EXIT: "lifecycle",
    K.ENQUEUE: "lifecycle",
    K.CLAIM: "ledger",
    K.RESULT_WRITE: "ledger",
    K.LEASE_EXPIRED: "ledger",
    K.RECONCILE: "reconcile",
    K.ARRIVAL: "provider",
    K.COMMIT: "provider",
    K.HOLD: "fault",
    K.RELEASE: "fault",
    K.SIGNAL: "fault",
    K.ESCALATE: "fault",
    K.TOXIC_ON: "fault",
    K.TOXIC_OFF: "fault",
    K.RESTORE: "fault",
    K.CONTROL_DENIED: "fault",
    K.CANCEL: "fault",
    K.FAILPOINT: "failpoint",
    K.TOOLS: "provider",
    K.PLAN: "provider",
    K.NOTE: "note",
}
GROUP_LABELS: dict[str, str] = {
    "lifecycle": "worker lifecycle / enqueue",
    "failpoint": "failpoint reached",
    "ledger": "claim / result write / ack",
    "provider": "provider arrival / commit",
    "reconcile": "reconcile / review",
    "fault": "fault: signal, hold, toxic, restore",
    "note": "note / other",
}
OUTCOME_LABELS: dict[str, str] = {
    "ok": "outcome ok",
    "rejected": "outcome rejected",
    "error": "outcome error",
    "unknown": "outcome unknown",
}
_LANE_ORDER = ("supervisor", "worker:", "provider:", "ledger", "network")


@dataclass(frozen=True)
class Mark:
    event: TimelineEvent
    x: float
    y: float
    group: str
    outcome: str | None
    label: str
    #: Label baseline relative to the mark (above it, or below when crowded).
    label_dy: float
    evidence: bool
    title: str

    @property
    def index(self) -> int:
        return self.event.index

    @property
    def at(self) -> str:
        """``x y`` for ``translate()``: shapes are drawn around the origin, so each mark
        needs one attribute instead of a pair per shape (2,000-trial reports render
        tens of thousands of marks)."""
        return f"{self.x:g} {self.y:g}"

    @property
    def css(self) -> str:
        classes = ["mark", f"g-{self.group}"]
        if self.outcome:
            classes.append(f"o-{self.outcome}")
        if self.evidence:
            classes.append("evidence")
        return " ".join(classes)


@dataclass(frozen=True)
class Lane:
    source: str
    y: float

    @property
    def label(self) -> str:
        if len(self.source) <= MAX_LABEL_CHARS:
            return self.source
        return self.source[: MAX_LABEL_CHARS - 1] + "…"


@dataclass(frozen=True)
class Timeline:
    width: int
    height: int
    plot_left: int
    lanes: tuple[Lane, ...]
    marks: tuple[Mark, ...]
    ticks: tuple[Tick, ...]
    breaks: tuple[Break, ...]
    #: x of each signal sent: drawn as a rule across all lanes, the moment of the crash.
    rules: tuple[float, ...]
    groups: tuple[str, ...]
    outcomes: tuple[str, ...]

    @property
    def lane_h(self) -> int:
        return LANE_H

    @property
    def top(self) -> int:
        return TOP

    @property
    def plot_bottom(self) -> float:
        return self.height - BOTTOM


def lane_order(source: str) -> tuple[int, str]:
    for i, prefix in enumerate(_LANE_ORDER):
        if source == prefix or (prefix.endswith(":") and source.startswith(prefix)):
            return (i, source)
    return (len(_LANE_ORDER), source)


def layout(trial: TrialRow, highlighted: frozenset[int] = frozenset()) -> Timeline | None:
    """Place ``trial.events``; None when the trial recorded no events."""
    events = trial.events
    if not events:
        return None
    sources = sorted({e.source for e in events}, key=lane_order)
    longest = max(len(s) for s in sources)
    label_w = max(MIN_LABEL_W, round(min(longest, MAX_LABEL_CHARS) * LANE_CHAR_W) + 24)
    lane_y = {s: TOP + LANE_H * i + LANE_H / 2 for i, s in enumerate(sources)}
    axis = build_axis(
        [e.t * 1000.0 for e in events], x0=label_w + 16.0, x1=float(label_w + PLOT_W - 40)
    )

    def x_of(t_s: float) -> float:
        return axis.x(t_s * 1000.0)

    marks = []
    # Right edge of the last label per (lane, row): labels go above the mark, or below when the one
    # above would overlap; when both would, the label is left out (the <title> stays).
    last_x: dict[tuple[str, int], float] = {}
    for e in sorted(events, key=lambda e: (e.t, e.index)):
        x = x_of(e.t)
        y = lane_y[e.source]
        label, label_dy = "", 0.0
        half = label_width(e.kind, bold=e.index in highlighted) / 2
        for label_row, dy in ((0, -11.0), (1, 19.0)):
            if x - half >= last_x.get((e.source, label_row), -1e9) + LABEL_GAP:
                last_x[(e.source, label_row)] = x + half
                label, label_dy = e.kind, dy
                break
        marks.append(
            Mark(
                event=e,
                x=x,
                y=y,
                group=KIND_GROUPS.get(e.kind, "note"),
                outcome=e.outcome if e.outcome in OUTCOME_LABELS else None,
                label=label,
                label_dy=label_dy,
                evidence=e.index in highlighted,
                title=event_title(e),
            )
        )
    return Timeline(
        width=label_w + PLOT_W,
        height=TOP + LANE_H * len(sources) + BOTTOM,
        plot_left=label_w,
        lanes=tuple(Lane(source=s, y=lane_y[s]) for s in sources),
        marks=tuple(marks),
        ticks=axis.ticks,
        breaks=axis.breaks,
        rules=tuple(m.x for m in marks if m.event.kind == "signal"),
        groups=tuple(dict.fromkeys(m.group for m in marks)),
        outcomes=tuple(dict.fromkeys(m.outcome for m in marks if m.outcome)),
    )


def event_title(e: TimelineEvent) -> str:
    parts = [f"#{e.index} {e.kind} at {e.t * 1000.0:.1f} ms on {e.source}"]
    if e.job is not None:
        parts.append(f"job {e.job}" + (f" attempt {e.attempt}" if e.attempt is not None else ""))
    if e.fields:
        parts.append(json.dumps(dict(e.fields), sort_keys=True, default=str, ensure_ascii=False))
    return "\n".join(parts)
