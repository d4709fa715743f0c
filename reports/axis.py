"""The timeline's time axis, with breaks over long idle gaps.

Trials spend most of their time waiting (a lease expiring, a quiescence poll), so on a
linear axis every interesting event crowds into a few pixels at each end. Gaps longer
than 15% of the trial (and 100 ms) are cut out and drawn as a break (labelled with the time
skipped); each remaining segment keeps a linear scale of its own, and time still only
grows to the right.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

#: A gap is cut when it is longer than this share of the trial and than MIN_GAP_MS.
GAP_SHARE = 0.15
MIN_GAP_MS = 100.0
MAX_BREAKS = 4
BREAK_W = 34.0
#: Smallest share of the plot a segment gets, so a lone event still has room.
MIN_SEGMENT_SHARE = 0.1
TICK_EVERY_PX = 110.0


@dataclass(frozen=True)
class Segment:
    t0_ms: float
    t1_ms: float
    x0: float
    x1: float

    def x(self, t_ms: float) -> float:
        span = self.t1_ms - self.t0_ms
        return self.x0 + (self.x1 - self.x0) * ((t_ms - self.t0_ms) / span if span else 0.5)


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class Break:
    x: float
    label: str


@dataclass(frozen=True)
class TimeAxis:
    segments: tuple[Segment, ...]
    ticks: tuple[Tick, ...]
    breaks: tuple[Break, ...]

    def x(self, t_ms: float) -> float:
        for seg in self.segments:
            if t_ms <= seg.t1_ms:
                return round(seg.x(max(t_ms, seg.t0_ms)), 2)
        return round(self.segments[-1].x1, 2)


def build_axis(times_ms: Sequence[float], *, x0: float, x1: float) -> TimeAxis:
    """An axis from ``x0`` to ``x1`` px covering ``times_ms`` and the trial start (0 ms)."""
    points = sorted({0.0, *times_ms})
    first, end = points[0], points[-1]
    gaps = [
        (b - a, a, b)
        for a, b in itertools.pairwise(points)
        if b - a > max(GAP_SHARE * end, MIN_GAP_MS)
    ]
    cuts = sorted(sorted(gaps, reverse=True)[:MAX_BREAKS], key=lambda g: g[1])
    if not cuts:
        step = tick_step(end - first)
        t0 = math.floor(first / step) * step
        t1 = max(t0 + step, math.ceil(end / step) * step)
        seg = Segment(t0, t1, x0, x1)
        return TimeAxis((seg,), _ticks(seg, step), ())
    spans: list[tuple[float, float]] = []
    start = first
    for _, a, b in cuts:
        spans.append((start, a))
        start = b
    spans.append((start, end))
    active = sum(b - a for a, b in spans) or 1.0
    # Pad each segment so marks at its ends do not sit on the break.
    padded = [(a - 0.04 * active if i else a, b + 0.04 * active) for i, (a, b) in enumerate(spans)]
    usable = (x1 - x0) - BREAK_W * len(cuts)
    # Width follows both how long a segment lasts and how many events it holds: a burst
    # of events in a few milliseconds needs room, an idle stretch with one mark does not.
    durations = [b - a for a, b in padded]
    counts = [sum(1 for t in times_ms if a <= t <= b) for a, b in spans]
    weights = [
        d / sum(durations) + n / max(1, sum(counts)) for d, n in zip(durations, counts, strict=True)
    ]
    floor = MIN_SEGMENT_SHARE * sum(weights)
    weights = [max(w, floor) for w in weights]
    total = sum(weights)
    segments: list[Segment] = []
    breaks: list[Break] = []
    x = x0
    for i, ((a, b), w) in enumerate(zip(padded, weights, strict=True)):
        width = usable * w / total
        segments.append(Segment(a, b, x, x + width))
        x += width
        if i < len(cuts):
            gap = padded[i + 1][0] - b
            breaks.append(Break(x + BREAK_W / 2, f"+{_duration(gap)}"))
            x += BREAK_W
    ticks: list[Tick] = []
    for seg in segments:
        count = max(1.0, (seg.x1 - seg.x0) / TICK_EVERY_PX)
        ticks += _ticks(seg, tick_step(seg.t1_ms - seg.t0_ms, count=count))
    return TimeAxis(tuple(segments), tuple(ticks), tuple(breaks))


def tick_step(span_ms: float, *, count: float = 6.0) -> float:
    """A 1/2/5 x 10^n step giving about ``count`` ticks over ``span_ms``."""
    if span_ms <= 0:
        return 1.0
    raw = span_ms / count
    base = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * base:
            return float(m * base)
    return float(10 * base)


def _ticks(seg: Segment, step: float) -> tuple[Tick, ...]:
    first = math.ceil(seg.t0_ms / step - 1e-9)
    last = math.floor(seg.t1_ms / step + 1e-9)
    return tuple(
        Tick(x=round(seg.x(i * step), 2), label=_ms(i * step)) for i in range(first, last + 1)
    )


def _ms(ms: float) -> str:
    ms = round(ms, 6) + 0.0  # + 0.0 turns -0.0 into 0.0
    return f"{ms:g} ms" if abs(ms) < 10_000 else f"{ms / 1000:g} s"


def _duration(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"
