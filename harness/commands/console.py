"""What crashpoint shows on the terminal: verdict glyphs, progress, the run's summary and
the selftest's kill matrix. Messages go to stderr; tables meant for a pipe to stdout."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.contract.vocabulary import Verdict
from harness.verdict import TrialResult

console = Console(stderr=True)
if not console.is_terminal:
    # Logs and CI pages are wide; rich's 80-column default would wrap every trial id.
    console = Console(stderr=True, width=160, soft_wrap=True)
#: For output meant to be read or piped as the command's result (``points``, ``report``).
stdout = Console()

GLYPH = {Verdict.HELD: "✓", Verdict.VIOLATED: "✗", Verdict.INCONCLUSIVE: "?", Verdict.SKIPPED: "-"}
STYLE = {
    Verdict.HELD: "green",
    Verdict.VIOLATED: "bold red",
    Verdict.INCONCLUSIVE: "yellow",
    Verdict.SKIPPED: "dim",
}
#: Too many trials to list: the summary table then shows only those that did not hold.
LONG_RUN = 25

Advance = Callable[[TrialResult], None]


def progress_printer(total: int, label: str) -> tuple[Progress | None, Advance]:
    """A live bar on a terminal, one line per finished trial elsewhere (CI logs)."""
    if console.is_terminal:
        bar = Progress(
            TextColumn(f"[bold]{label}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=console,
            transient=True,
        )
        task = bar.add_task("", total=total)

        def advance(r: TrialResult) -> None:
            bar.update(task, advance=1, description=f"{GLYPH[Verdict(r.verdict)]} {r.cell.id}")

        return bar, advance

    done = [0]

    def line(r: TrialResult) -> None:
        done[0] += 1
        console.print(
            f"[{done[0]}/{total}] {GLYPH[Verdict(r.verdict)]} {r.verdict:<12} {r.cell.id} "
            f"({r.duration_s:.2f} s)",
            highlight=False,
        )

    return None, line


def print_summary(doc: Mapping[str, Any], out: Path) -> None:
    s = doc["summary"]
    table = Table(title=f"crashpoint {doc['command']} — seed {doc['seed']}", show_lines=False)
    for col in ("trial", "verdict", "violations", "s"):
        table.add_column(col)
    for t in doc["trials"]:
        verdict = Verdict(t["verdict"])
        if verdict == Verdict.HELD and s["total"] > LONG_RUN:
            continue  # long runs list only what needs attention
        table.add_row(
            t["id"],
            f"[{STYLE[verdict]}]{GLYPH[verdict]} {verdict}[/]",
            ", ".join(sorted({v["invariant"] for v in t["violations"]})) or (t["reason"] or ""),
            f"{t['duration_s']:.2f}",
        )
    if table.row_count:
        console.print(table)
    console.print(
        f"{s['total']} trials: [green]{s['held']} held[/], [red]{s['violated']} violated[/], "
        f"[yellow]{s['inconclusive']} inconclusive[/], {s['skipped']} skipped "
        f"in {doc['duration_s']:.1f} s"
    )
    report = out / "index.html"
    where = report if report.exists() else out / "results.json"
    console.print(f"report: {where}")


def print_kill_matrix(doc: Mapping[str, Any]) -> None:
    """The selftest's mutant x scenario table and the one-line tally under it."""
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
