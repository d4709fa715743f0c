"""``crashpoint points``: the injection table, one row per scenario."""

from __future__ import annotations

from rich.table import Table

from harness.commands.console import stdout
from scenarios.table import SCENARIOS


def points_command() -> None:
    table = Table(title="crashpoint injection table")
    for col in ("scenario", "points", "providers", "signals", "expected -> recovery"):
        table.add_column(col)
    for s in SCENARIOS:
        table.add_row(
            s.name,
            "\n".join(s.points),
            ", ".join(s.providers),
            ", ".join(x or "-" for x in s.signals),
            f"{s.expected} -> {s.recovery}",
        )
    stdout.print(table)
