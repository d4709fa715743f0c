"""The selftest's kill matrix: which cells caught which mutant, by which invariant.

Data for ``results.json``; ``harness.commands.console`` prints it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from harness.contract.vocabulary import Verdict
from harness.kill_admission import stopped_after_kill
from scenarios.mutants import Mutant

#: A scenario none of whose cells ran for a mutant, because the mutant was already killed.
NOT_RUN = "not run"
#: How the selftest ran: each mutant until caught as predicted, or every cell of each.
MODES = ("until_killed", "full")


def kill_matrix(
    trials: Sequence[dict[str, Any]], mutants: Mapping[str, Mutant], *, mode: str = "full"
) -> dict[str, Any]:
    """A mutant is killed when some trial of it is ``violated``; the correct worker's
    trials are counted apart (they must show no violation at all). A scenario is
    ``not run`` for a mutant when all its cells there were skipped after the kill."""
    if mode not in MODES:
        raise ValueError(f"kill matrix mode={mode!r}; use one of {MODES}")
    by_mutant: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in trials:
        by_mutant[t["mutant"] or ""].append(t)
    rows: dict[str, Any] = {}
    for name, m in sorted(mutants.items()):
        own = by_mutant.get(name, [])
        killers = [t for t in own if t["verdict"] == Verdict.VIOLATED]
        invariants = sorted({v["invariant"] for t in killers for v in t["violations"]})
        per_scenario: dict[str, str] = {}
        for t in own:
            state = per_scenario.get(t["scenario"])
            if stopped_after_kill(t):
                per_scenario.setdefault(t["scenario"], NOT_RUN)
            elif t["verdict"] == Verdict.VIOLATED:
                per_scenario[t["scenario"]] = "killed"
            elif state in (None, NOT_RUN):
                held = t["verdict"] == Verdict.HELD
                per_scenario[t["scenario"]] = "survived" if held else t["verdict"]
        rows[name] = {
            "description": m.bug,
            "expected_scenario": m.exposed_by,
            "expected_invariant": m.invariant,
            "killed": bool(killers),
            "by": [t["id"] for t in killers],
            "invariants": invariants,
            "caught_as_expected": m.invariant in invariants,
            "scenarios": per_scenario,
            "trials": len(own),
            "not_run": sum(1 for t in own if stopped_after_kill(t)),
        }
    correct = by_mutant.get("", [])
    return {
        "mode": mode,
        "mutants": rows,
        "correct_worker": {
            "trials": len(correct),
            "violations": sum(1 for t in correct if t["verdict"] == Verdict.VIOLATED),
            "inconclusive": sum(1 for t in correct if t["verdict"] == Verdict.INCONCLUSIVE),
        },
    }
