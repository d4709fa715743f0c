"""What crashpoint shows on the terminal: verdict glyphs, progress, the run's summary and
the selftest's kill matrix. Messages go to stderr; tables meant for a pipe to stdout."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from harness.applicable import summary_line
from harness.contract.vocabulary import Verdict
from harness.kill_admission import STOPPED
from harness.trial_run import TrialResult

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
        if r.verdict == Verdict.SKIPPED and (r.reason or "").startswith(STOPPED):
            # A selftest stops a caught mutant's other cells by the hundred; the kill
            # matrix counts them, a line each would bury the trials that ran.
            return
        console.print(
            f"[{done[0]}/{total}] {GLYPH[Verdict(r.verdict)]} {r.verdict:<12} {r.cell.id} "
            f"({r.duration_s:.2f} s)",
            highlight=False,
        )

    return None, line


def print_summary(doc: Mapping[str, Any], out: Path, *, to: Console | None = None) -> None:
    """The run's trials and tally. Trial ids are what ``replay --trial`` takes, so they
    are never cut: a table where they fit whole, one line per trial where they do not."""
    to = to or console
    s = doc["summary"]
    title = f"crashpoint {doc['command']} — seed {doc['seed']}"
    rows = [
        t
        for t in doc["trials"]
        # Long runs list only what needs attention.
        if not (Verdict(t["verdict"]) == Verdict.HELD and s["total"] > LONG_RUN)
    ]
    if rows:
        widest = max(len(t["id"]) for t in rows)
        if widest + _SUMMARY_COLUMNS <= to.width:
            to.print(_summary_table(title, rows, id_width=widest))
        else:
            to.print(title, style="italic", markup=False, highlight=False)
            for t in rows:
                verdict = Verdict(t["verdict"])
                line = Text.assemble(
                    (f"{GLYPH[verdict]} {verdict:<12}", STYLE[verdict]),
                    f" {t['duration_s']:6.2f} s  {t['id']}",
                )
                why = _why(t)
                if why:
                    line.append(f"  {why}")
                to.print(line, soft_wrap=True, highlight=False)
    to.print(
        f"{s['total']} trials: [green]{s['held']} held[/], [red]{s['violated']} violated[/], "
        f"[yellow]{s['inconclusive']} inconclusive[/], {s['skipped']} skipped "
        f"in {doc['duration_s']:.1f} s"
    )
    if s.get("warnings"):
        to.print(f"[yellow]{s['warnings']} warnings[/] (they break no invariant; see the report)")
    for aside in not_as_named(doc["trials"]):
        to.print(aside, markup=False, highlight=False, soft_wrap=True)
    stop = doc.get("interrupted")
    if stop:
        to.print(
            f"[yellow]interrupted by {stop['signal']}[/]: the report holds the "
            f"{stop['finished']} trials that finished of {stop['cells']}",
        )
    left_out = summary_line(doc.get("not_applicable") or [])
    if left_out is not None:
        to.print(left_out, markup=False, highlight=False, soft_wrap=True)
    report = out / "index.html"
    where = report if report.exists() else out / "results.json"
    to.print(f"report: {where}", markup=False, highlight=False, soft_wrap=True)


#: How a trial's ``exercised`` begins when the cell did not exercise what it names.
_ASIDE = ("not exercised", "reached at ", "landed at ")
#: The most such cells named one by one; the report has the rest.
_ASIDE_SHOWN = 5


def not_as_named(trials: list[Mapping[str, Any]]) -> list[str]:
    """The cells whose fault did not land where their name says (a kill at another
    provider's boundary, a redelivery nobody took up), each with where it did."""
    aside = [t for t in trials if str(t.get("exercised") or "").startswith(_ASIDE)]
    if not aside:
        return []
    lines = [f"{len(aside)} cell(s) did not exercise what they name:"]
    lines += [f"  {t['id']}: {t['exercised']}" for t in aside[:_ASIDE_SHOWN]]
    if len(aside) > _ASIDE_SHOWN:
        lines.append(f"  and {len(aside) - _ASIDE_SHOWN} more (see the report)")
    return lines


#: The summary table's columns besides the trial id (verdict, violations, seconds) and
#: its borders: below this much room beside the widest id, trials go one per line.
_SUMMARY_COLUMNS = 14 + 24 + 6 + 13


def _summary_table(title: str, rows: list[Mapping[str, Any]], *, id_width: int) -> Table:
    table = Table(title=title, show_lines=False)
    table.add_column("trial", no_wrap=True, min_width=id_width)
    table.add_column("verdict", no_wrap=True)
    table.add_column("violations", overflow="fold")
    table.add_column("s", justify="right", no_wrap=True)
    for t in rows:
        verdict = Verdict(t["verdict"])
        table.add_row(
            Text(t["id"]),
            Text(f"{GLYPH[verdict]} {verdict}", style=STYLE[verdict]),
            Text(_why(t)),
            f"{t['duration_s']:.2f}",
        )
    return table


def _why(t: Mapping[str, Any]) -> str:
    """The violated invariants, or the reason a trial was not decided."""
    return ", ".join(sorted({v["invariant"] for v in t["violations"]})) or (t["reason"] or "")


def print_kill_matrix(doc: Mapping[str, Any]) -> None:
    """The selftest's mutant x scenario table and the one-line tally under it."""
    km = doc["kill_matrix"]
    scenarios = sorted({t["scenario"] for t in doc["trials"]})
    table = Table(title="kill matrix (mutant x scenario)")
    table.add_column("mutant")
    for s in scenarios:
        table.add_column(_short(s), justify="center")
    table.add_column("caught by")
    glyph = {
        "killed": "[red]✗[/]",
        "survived": "[dim]·[/]",
        "inconclusive": "[yellow]?[/]",
        "not run": "[dim]-[/]",
    }
    for name, row in km["mutants"].items():
        cells = [glyph.get(row["scenarios"].get(s, ""), "") for s in scenarios]
        verdict = ", ".join(row["invariants"]) if row["killed"] else "[bold red]SURVIVED[/]"
        if row["killed"] and not row["caught_as_expected"]:
            verdict += f" [yellow](expected {row['expected_invariant']})[/]"
        table.add_row(name, *cells, verdict)
    console.print(table)
    console.print("columns: " + ", ".join(f"{_short(s)} = {s}" for s in scenarios))
    not_run = sum(r.get("not_run", 0) for r in km["mutants"].values())
    if km.get("mode") == "until_killed":
        console.print(
            f"each mutant ran until caught: {not_run} of its trials not run (-); "
            "--full runs every cell"
        )
    c = km["correct_worker"]
    killed = sum(1 for r in km["mutants"].values() if r["killed"])
    console.print(
        f"correct worker: {c['trials']} trials, {c['violations']} violated, "
        f"{c['inconclusive']} inconclusive; mutants killed: {killed}/{len(km['mutants'])}"
    )


def _short(scenario: str) -> str:
    return "".join(w[0] for w in scenario.split("_"))
