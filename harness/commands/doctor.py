"""``crashpoint doctor``: the table of what is here and what is missing, and the verdict.

The exit status is 0 whenever a run on the embedded default is possible, and 3 otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Console
from rich.table import Table

from harness.commands.console import stdout
from harness.contract.vocabulary import ExitCode
from harness.doctor import PROBES, Check, run_checks


def render(checks: Sequence[Check]) -> Table:
    table = Table(title="crashpoint doctor")
    table.add_column("component")
    table.add_column("status")
    table.add_column("version")
    table.add_column("detail", overflow="fold")
    fixes = any(c.fix and not c.ok for c in checks)
    if fixes:  # only spend the width on it when something is missing
        table.add_column("to get it", overflow="fold")
    for c in checks:
        if c.ok:
            status = "[green]ok[/green]"
        elif c.required:
            status = "[red]MISSING (required)[/red]"
        else:
            status = "[yellow]missing (optional)[/yellow]"
        row = [c.component, status, c.version or "", c.detail]
        table.add_row(*row, *([c.fix if not c.ok else ""] if fixes else []))
    return table


def run_doctor(
    probes: Sequence[Callable[[], Check]] = PROBES, *, console: Console | None = None
) -> int:
    """Print the table; 0 when the embedded default can run, 3 when it cannot."""
    checks = run_checks(probes)
    console = console or stdout
    console.print(render(checks))
    runnable = all(c.ok for c in checks if c.required)
    missing = [c.component for c in checks if not c.ok and not c.required]
    if not runnable:
        console.print("The embedded default (Python + SQLite) cannot run here; see above.")
        return ExitCode.INCONCLUSIVE
    if missing:
        console.print(
            f"The embedded default runs. Without {', '.join(missing)}, the scenarios that need "
            "them are reported as skipped."
        )
    else:
        console.print("Everything is available.")
    return ExitCode.HELD
