"""The selftest's kill matrix: which cells caught which mutant, by which invariant."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from scenarios.mutants import Mutant


def kill_matrix(trials: Sequence[dict[str, Any]], mutants: Mapping[str, Mutant]) -> dict[str, Any]:
    """A mutant is killed when some trial of it is ``violated``; the correct worker's
    trials are counted apart (they must show no violation at all)."""
    by_mutant: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in trials:
        by_mutant[t["mutant"] or ""].append(t)
    rows: dict[str, Any] = {}
    for name, m in sorted(mutants.items()):
        own = by_mutant.get(name, [])
        killers = [t for t in own if t["verdict"] == "violated"]
        invariants = sorted({v["invariant"] for t in killers for v in t["violations"]})
        per_scenario: dict[str, str] = {}
        for t in own:
            state = per_scenario.get(t["scenario"])
            if t["verdict"] == "violated":
                per_scenario[t["scenario"]] = "killed"
            elif state is None:
                per_scenario[t["scenario"]] = "survived" if t["verdict"] == "held" else t["verdict"]
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
        }
    correct = by_mutant.get("", [])
    return {
        "mutants": rows,
        "correct_worker": {
            "trials": len(correct),
            "violations": sum(1 for t in correct if t["verdict"] == "violated"),
            "inconclusive": sum(1 for t in correct if t["verdict"] == "inconclusive"),
        },
    }


def print_kill_matrix(doc: dict[str, Any], console: Console) -> None:
    km = doc["kill_matrix"]
    scenarios = sorted({t["scenario"] for t in doc["trials"]})
    table = Table(title="kill matrix (mutant x scenario)")
    table.add_column("mutant")
    for s in scenarios:
        table.add_column(_short(s), justify="center")
    table.add_column("caught by")
    glyph = {"killed": "[red]✗[/]", "survived": "[dim]·[/]", "inconclusive": "[yellow]?[/]"}
    for name, row in km["mutants"].items():
        cells = [glyph.get(row["scenarios"].get(s, ""), "") for s in scenarios]
        verdict = ", ".join(row["invariants"]) if row["killed"] else "[bold red]SURVIVED[/]"
        if row["killed"] and not row["caught_as_expected"]:
            verdict += f" [yellow](expected {row['expected_invariant']})[/]"
        table.add_row(name, *cells, verdict)
    console.print(table)
    console.print("columns: " + ", ".join(f"{_short(s)} = {s}" for s in scenarios))
    c = km["correct_worker"]
    killed = sum(1 for r in km["mutants"].values() if r["killed"])
    console.print(
        f"correct worker: {c['trials']} trials, {c['violations']} violated, "
        f"{c['inconclusive']} inconclusive; mutants killed: {killed}/{len(km['mutants'])}"
    )


def _short(scenario: str) -> str:
    return "".join(w[0] for w in scenario.split("_"))
