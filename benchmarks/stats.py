"""Small helpers so every benchmark reports the same way."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

#: Where every benchmark writes its figures, in the working directory.
BENCH_JSON = Path("bench.json")


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


def write_bench(updates: Mapping[str, Any], path: Path = BENCH_JSON) -> None:
    """Merge ``updates`` into ``bench.json``: a benchmark replaces its own keys and keeps
    the ones other benchmarks wrote (a file that is not JSON is started again)."""
    doc: dict[str, Any] = {}
    if path.exists():
        try:
            doc = json.loads(path.read_text())
        except json.JSONDecodeError:
            doc = {}
    doc.update(updates)
    path.write_text(json.dumps(doc, indent=2) + "\n")
