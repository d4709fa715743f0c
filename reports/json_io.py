"""Write the model back to ``results.json``; ``load_results`` reads what this writes."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.contract.vocabulary import RESULTS_SCHEMA
from reports.model import KillMatrix, Results, TrialRow, ViolationRow


def results_to_dict(results: Results) -> dict[str, Any]:
    out: dict[str, Any] = {
        "schema": RESULTS_SCHEMA,
        "run_id": results.run_id,
        "command": results.command,
        "seed": results.seed,
        "started_at": results.started_at,
        "finished_at": results.finished_at,
        "duration_s": results.duration_s,
        "target": {
            "name": results.target.name,
            "kind": results.target.kind,
            "mutant": results.target.mutant,
            **results.target.extra,
        },
        "environment": dict(results.environment),
        "trials": [_trial(t) for t in results.trials],
        "summary": _summary(results),
    }
    if results.kill_matrix is not None:
        out["kill_matrix"] = _kill_matrix(results.kill_matrix)
    if results.merged_from:
        out["merged_from"] = list(results.merged_from)
    out.update(results.extra)
    return out


def write_results(results: Results, path: str | Path) -> Path:
    """Write ``results`` as ``results.json``."""
    return write_json(results_to_dict(results), path)


def write_json(doc: Mapping[str, Any], path: str | Path) -> Path:
    """Write a results document atomically (a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def _summary(results: Results) -> dict[str, int]:
    s = results.summary
    return {
        "total": s.total,
        "held": s.held,
        "violated": s.violated,
        "inconclusive": s.inconclusive,
        "skipped": s.skipped,
        "not_reached": s.not_reached,
        "warnings": s.warnings,
    }


def _trial(t: TrialRow) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": t.id,
        "scenario": t.scenario,
        "injection_point": t.injection_point,
        "provider": t.provider,
        "signal": t.signal,
        "backend": t.backend,
        "ledger": t.ledger,
        "mutant": t.mutant,
        "verdict": t.verdict,
        "reached": t.reached,
        "reason": t.reason,
        "violations": [_violation(v) for v in t.violations],
        "warnings": [_violation(w, name="warning") for w in t.warnings],
        "duration_s": t.duration_s,
        "seed": t.seed,
        "replay": t.replay,
        "description": t.description,
        "expected": t.expected,
        "events": [
            {
                "t": e.t,
                "source": e.source,
                "kind": e.kind,
                "job": e.job,
                "attempt": e.attempt,
                "fields": dict(e.fields),
            }
            for e in t.events
        ],
        "timings": dict(t.timings),
    }
    if t.run_id is not None:
        out["run_id"] = t.run_id
    out.update(t.extra)
    return out


def _violation(v: ViolationRow, *, name: str = "invariant") -> dict[str, Any]:
    ev = v.evidence
    evidence: dict[str, Any] = {
        "arrivals": [dict(a) for a in ev.arrivals],
        "effects": [dict(e) for e in ev.effects],
        "ledger": [dict(row) for row in ev.ledger],
        "events": list(ev.events),
    }
    evidence.update(ev.extra)
    return {name: v.invariant, "job": v.job, "message": v.message, "evidence": evidence}


def _kill_matrix(km: KillMatrix) -> dict[str, Any]:
    out: dict[str, Any] = {
        "mutants": {
            m.name: {
                "description": m.description,
                "expected_invariant": m.expected_invariant,
                "killed": m.killed,
                "by": list(m.by),
                "invariants": list(m.invariants),
            }
            for m in km.mutants
        }
    }
    if km.mode is not None:
        out["mode"] = km.mode
    if km.correct_trials is not None or km.correct_violations is not None:
        out["correct_worker"] = {
            "trials": km.correct_trials,
            "violations": km.correct_violations,
        }
    return out
