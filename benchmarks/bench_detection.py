"""Trials to first detection, per mutant: the fixed matrix, ``explore`` and the random
chaos baseline, measured in one run.

- **matrix**: the mutant's cells in the matrix's own order (``crashpoint run --mutant M``),
  run until the first violated one; the figure is how many cells ran up to it, that one
  included (cells run two at a time, in order, so none after it counts).
- **explore**: ``crashpoint explore --mutant M --seed S``; the generated schedules decided
  up to the first failing one (its ``examples_needed``), nothing shrunk.
- **random**: the same with ``--mode random`` and the same budget.

``python -m benchmarks detection`` (``nox -s bench`` runs it) prints a table with the
ratios matrix/explore and random/explore and writes it into ``bench.json`` under
``detection``, keeping what other benchmarks wrote there. A search that found nothing
within its budget counts as ``>budget`` and its ratio as a lower bound.

Environment: ``DETECTION_BUDGET`` (default 50), ``DETECTION_SEED`` (1),
``DETECTION_MUTANTS`` (names, comma-separated; ``all``; default the twelve original ones),
``DETECTION_JOBS`` (2: searches side by side). About 10 to 15 minutes on two cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.stats import BENCH_JSON, write_bench
from harness.contract.vocabulary import Verdict
from harness.infra import RunInfra
from harness.plan import select_cells
from harness.runner import run_cells, run_spec
from scenarios.mutants import MUTANTS

OUT = BENCH_JSON
#: The twelve mutants the exploration goal was set against (scenarios/mutants.py's first).
ORIGINAL = tuple(MUTANTS)[:12]


def mutants_from_env() -> tuple[str, ...]:
    wanted = os.environ.get("DETECTION_MUTANTS", "")
    if not wanted:
        return ORIGINAL
    if wanted == "all":
        return tuple(MUTANTS)
    names = tuple(n.strip() for n in wanted.split(",") if n.strip())
    unknown = [n for n in names if n not in MUTANTS]
    if unknown:
        raise SystemExit(f"DETECTION_MUTANTS: {unknown[0]!r} is not a mutant")
    return names


# -- the fixed matrix ----------------------------------------------------------------------


def matrix_detection(mutant: str, *, seed: int, jobs: int) -> dict[str, Any]:
    """Cells run in the matrix's order up to the first violated one (None: none was)."""
    cells = select_cells(mutant=mutant)
    ran = 0
    t0 = time.perf_counter()
    with RunInfra.open(cells, ledger="sqlite", backend="process", pg_dsn=None) as infra:
        for start in range(0, len(cells), jobs):
            chunk = cells[start : start + jobs]
            spec = run_spec(infra, chunk, seed=seed, command="bench", jobs=jobs, target={})
            for result in run_cells(spec):
                if result.verdict != "skipped":
                    ran += 1
                if result.verdict == Verdict.VIOLATED:
                    return {
                        "trials": ran,
                        "cell": result.cell.id,
                        "cells": len(cells),
                        "wall_s": time.perf_counter() - t0,
                    }
    return {"trials": None, "cell": None, "cells": len(cells), "wall_s": time.perf_counter() - t0}


# -- explore and the random baseline -------------------------------------------------------


def explore(
    mutant: str, *, seed: int, budget: int, mode: str = "hypothesis", shrink_budget: int = 0
) -> dict[str, Any]:
    """One ``crashpoint explore`` in a child process; what its results.json says."""
    with tempfile.TemporaryDirectory(prefix="cp-bench-explore-") as tmp:
        argv = [
            sys.executable,
            "-m",
            "harness",
            "explore",
            "--mutant",
            mutant,
            "--seed",
            str(seed),
            "--budget",
            str(budget),
            "--mode",
            mode,
            "--shrink-budget",
            str(shrink_budget),
            "--out",
            tmp,
        ]
        t0 = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        try:
            doc = json.loads((Path(tmp) / "results.json").read_text())
        except FileNotFoundError:
            raise RuntimeError(f"{' '.join(argv)} wrote no results: {proc.stderr[-500:]}") from None
    ex = doc["exploration"]
    finding = ex.get("finding") or {}
    size = finding.get("size") or {}
    print(
        f"  {mutant} ({mode}, seed {seed}): {shown(ex['examples_needed'], budget)} examples, "
        f"{size.get('faults', '-')} fault(s), {wall:.0f} s",
        flush=True,
    )
    return {
        "examples": ex["examples_needed"],
        "trials_to_detection": ex["trials_to_detection"],
        "trials_run": ex["trials_run"],
        "faults": size.get("faults"),
        "jobs": size.get("jobs"),
        "finding": finding.get("describe"),
        "exit": proc.returncode,
        "wall_s": wall,
    }


def side_by_side(tasks: Sequence[Callable[[], dict[str, Any]]], jobs: int) -> list[dict[str, Any]]:
    """Run ``tasks`` ``jobs`` at a time; results in the tasks' order."""
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda task: task(), tasks))


# -- the table -----------------------------------------------------------------------------


def shown(n: int | None, budget: int) -> str:
    return f">{budget}" if n is None else str(n)


def ratio(num: int | None, den: int | None, num_cap: int, den_cap: int) -> str:
    """``num / den``; a search that found nothing counts as its cap (``>``: a bound)."""
    if num is None and den is None:
        return "-"
    top, bottom = num if num is not None else num_cap, den if den is not None else den_cap
    bound = ">" if num is None and den is not None else "<" if den is None else ""
    return f"{bound}{top / bottom:.1f}x"


def table(rows: dict[str, dict[str, Any]], budget: int) -> str:
    lines = [
        "| mutant | matrix (cells) | explore (examples) | random (examples) "
        "| matrix/explore | random/explore |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        m, e, r = row["matrix"]["trials"], row["explore"]["examples"], row["random"]["examples"]
        cells = row["matrix"]["cells"]
        lines.append(
            f"| {name} | {shown(m, cells)} | {shown(e, budget)} | {shown(r, budget)} "
            f"| {ratio(m, e, cells, budget)} | {ratio(r, e, budget, budget)} |"
        )
    return "\n".join(lines)


def main() -> None:
    budget = int(os.environ.get("DETECTION_BUDGET", "50"))
    seed = int(os.environ.get("DETECTION_SEED", "1"))
    jobs = int(os.environ.get("DETECTION_JOBS", "2"))
    names = mutants_from_env()
    t0 = time.perf_counter()
    searches = side_by_side(
        [
            (lambda n=n, mode=mode: explore(n, seed=seed, budget=budget, mode=mode))
            for n in names
            for mode in ("hypothesis", "random")
        ],
        jobs,
    )
    rows: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(names):
        rows[name] = {
            "matrix": matrix_detection(name, seed=seed, jobs=jobs),
            "explore": searches[2 * i],
            "random": searches[2 * i + 1],
        }
        print(f"  {name}: done", flush=True)
    doc = {"budget": budget, "seed": seed, "jobs": jobs}
    publish("detection", doc, rows, started=t0, text=table(rows, budget))


def publish(
    key: str, doc: dict[str, Any], rows: dict[str, Any], *, started: float, text: str
) -> None:
    """Write ``doc`` with its rows, the load and the wall time under ``key``; print it."""
    doc |= {
        "load_average": os.getloadavg(),
        "wall_s": time.perf_counter() - started,
        "mutants": rows,
    }
    write_bench({key: doc})
    print(text)
    print(f"written: {OUT.resolve()} ({key})")
