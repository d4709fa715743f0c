"""The results document: what a run writes to ``results.json`` (docs/results.md).

The runner turns cells into trial results; this module turns those into the record,
counts its verdicts and says which exit code the record calls for.
"""

from __future__ import annotations

import platform
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from harness.applicable import grouped
from harness.contract.vocabulary import RESULTS_SCHEMA, ExitCode, Verdict
from harness.plan import Cell
from harness.runner import RunSpec
from harness.trial_run import TrialResult


def replay_command(spec: RunSpec, cell: Cell) -> str:
    """The ``crashpoint run`` line that runs ``cell`` again with the run's seed."""
    parts = ["crashpoint", "run", *spec.replay_flags]
    if cell.mutant:
        parts += ["--mutant", cell.mutant]
    parts += ["--scenario", cell.scenario.name, "--point", cell.point]
    # A declared provider by its name: two providers of one kind are two cells.
    parts += ["--provider", cell.provider_name or cell.provider]
    if cell.signal:
        parts += ["--signal", cell.signal]
    parts += ["--ledger", cell.ledger, "--backend", cell.backend, "--seed", str(spec.seed)]
    return " ".join(parts)


def summarize(trials: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """``total``, one count per verdict (every verdict present), ``warnings``: how
    many warnings the trials gave in all, and ``needs_review``: how many jobs ended on
    the review desk."""
    counts = {v.value: 0 for v in Verdict}
    for t in trials:
        counts[Verdict(t["verdict"]).value] += 1
    warnings = sum(len(t.get("warnings") or ()) for t in trials)
    review = sum(len(t.get("review") or ()) for t in trials)
    return {"total": len(trials), **counts, "warnings": warnings, "needs_review": review}


def results_document(
    spec: RunSpec,
    results: Sequence[TrialResult],
    *,
    started: float,
    environment: dict[str, Any],
) -> dict[str, Any]:
    trials = [r.to_json(replay_command(spec, r.cell)) for r in results]
    _name_personas(trials, spec.target)
    finished = time.time()
    return {
        "schema": RESULTS_SCHEMA,
        "run_id": new_run_id(),
        "command": spec.command,
        "seed": spec.seed,
        "started_at": _iso(started),
        "finished_at": _iso(finished),
        "duration_s": round(finished - started, 3),
        "target": spec.target,
        "environment": environment,
        "trials": trials,
        "summary": summarize(trials),
        "not_applicable": grouped(spec.not_applicable),
    }


def _name_personas(trials: Sequence[dict[str, Any]], target: Mapping[str, Any]) -> None:
    """``persona`` in each trial whose provider speaks a real API's wire (``stripe``):
    ``provider`` stays its kind, which is what the scenarios and the oracle went by."""
    declared = target.get("providers") if isinstance(target, Mapping) else None
    rows = declared if isinstance(declared, list) else []
    personas = {
        p.get("name"): p.get("persona") for p in rows if isinstance(p, Mapping) and p.get("persona")
    }
    for t in trials:
        persona = personas.get(t.get("provider_name"))
        if persona is not None:
            t["persona"] = persona


def exit_code(
    summary: Mapping[str, int], *, strict: bool, fail_on_warning: bool = False
) -> ExitCode:
    """0 all held; 1 a violation (or, with --fail-on-warning, a warning); 3 inconclusive
    (or, with --strict, skipped), and 3 when nothing held: a gate whose every cell was
    skipped (or that ran none) tested nothing, and must not pass as if it had."""
    if summary[Verdict.VIOLATED] or (fail_on_warning and summary.get("warnings", 0)):
        return ExitCode.VIOLATED
    if summary[Verdict.INCONCLUSIVE] or (strict and summary[Verdict.SKIPPED]):
        return ExitCode.INCONCLUSIVE
    if not summary[Verdict.HELD]:
        return ExitCode.INCONCLUSIVE
    return ExitCode.HELD


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:4]


def base_environment() -> dict[str, Any]:
    """The versions every run records; the run's infrastructure fills in its servers."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "toxiproxy": None,
        "docker": None,
        "postgres": None,
    }


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
