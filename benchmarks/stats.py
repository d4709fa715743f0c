"""Small helpers so every benchmark reports the same way."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def repeat_s(fn: Callable[[], object], *, runs: int) -> list[float]:
    """Wall seconds of ``runs`` calls of ``fn``."""
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def describe(samples: list[float], unit: str = "s") -> str:
    med = statistics.median(samples)
    spread = f"min {min(samples):.4g}, max {max(samples):.4g}, n={len(samples)}"
    return f"median {med:.4g} {unit} ({spread})"
