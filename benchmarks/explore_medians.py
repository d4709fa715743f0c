"""Exploration's goal, measured: per mutant, over several seeds, the examples ``explore``
needed to find it and the size of the finding it shrank to (faults), with medians.

``python -m benchmarks.explore_medians`` runs ``crashpoint explore --budget B --seed S
--mutant M`` with its defaults otherwise (``--confirm 2/3``, ``--shrink-budget 60``),
prints a table and writes it into ``bench.json`` under ``explore_medians``. It is not one
of ``python -m benchmarks``'s set: at five seeds it runs about sixty searches.

Environment: ``MEDIANS_SEEDS`` (default 5: seeds 1..5), ``MEDIANS_BUDGET`` (50),
``DETECTION_MUTANTS`` and ``DETECTION_JOBS`` as in ``bench_detection``.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from benchmarks.bench_detection import explore, mutants_from_env, publish, side_by_side

#: ``crashpoint explore``'s own default.
SHRINK_BUDGET = 60


def median(values: list[int | None], cap: int) -> float | None:
    """The median, a search that found nothing counted as past ``cap`` (None if most did)."""
    ranked = sorted(v if v is not None else cap + 1 for v in values)
    mid = statistics.median(ranked)
    return None if mid > cap else mid


def table(rows: dict[str, dict[str, Any]], budget: int) -> str:
    lines = [
        "| mutant | found | examples (per seed) | median examples | faults (per seed) "
        "| median faults |",
        "|---|---|---|---|---|---|",
    ]

    def each(values: list[int | None]) -> str:
        return " ".join("-" if v is None else str(v) for v in values)

    for name, row in rows.items():
        med_e, med_f = row["median_examples"], row["median_faults"]
        lines.append(
            f"| {name} | {row['found']}/{len(row['examples'])} | {each(row['examples'])} "
            f"| {f'>{budget}' if med_e is None else f'{med_e:g}'} | {each(row['faults'])} "
            f"| {'-' if med_f is None else f'{med_f:g}'} |"
        )
    return "\n".join(lines)


def main() -> None:
    seeds = range(1, int(os.environ.get("MEDIANS_SEEDS", "5")) + 1)
    budget = int(os.environ.get("MEDIANS_BUDGET", "50"))
    jobs = int(os.environ.get("DETECTION_JOBS", "2"))
    names = mutants_from_env()
    t0 = time.perf_counter()
    runs = side_by_side(
        [
            (lambda n=n, s=s: explore(n, seed=s, budget=budget, shrink_budget=SHRINK_BUDGET))
            for n in names
            for s in seeds
        ],
        jobs,
    )
    rows: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(names):
        mine = runs[i * len(seeds) : (i + 1) * len(seeds)]
        examples = [r["examples"] for r in mine]
        faults = [r["faults"] for r in mine]
        found = [f for f in faults if f is not None]
        rows[name] = {
            "found": len(found),
            "examples": examples,
            "faults": faults,
            "median_examples": median(examples, budget),
            "median_faults": statistics.median(found) if found else None,
            "runs": mine,
        }
    doc = {"budget": budget, "seeds": list(seeds), "shrink_budget": SHRINK_BUDGET, "jobs": jobs}
    publish("explore_medians", doc, rows, started=t0, text=table(rows, budget))


if __name__ == "__main__":
    main()
