"""``crashpoint points``: the injection table, one entry per scenario, or as JSON.

The scenario and point names are what ``--scenario`` and ``--point`` take, so they are
never cut or broken, at any width and in a pipe: the descriptive text wraps instead,
and where even the names do not fit side by side in a table (under about 80 columns)
each scenario becomes a block of lines, one field per line.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from harness.commands.console import stdout
from scenarios.table import SCENARIOS, Scenario

POINTS_SCHEMA = "crashpoint.points/1"
#: The descriptive column is not worth a table below this width.
_DESCRIPTION_MIN = 20
#: Three column separators and a space either side of each (no outer edge).
_TABLE_OVERHEAD = 3 + 6


def points_document() -> dict[str, Any]:
    """The table as data: every field of every scenario, in table order."""
    return {"schema": POINTS_SCHEMA, "scenarios": [asdict(s) for s in SCENARIOS]}


def points_command(*, as_json: bool = False, console: Console | None = None) -> None:
    console = console or stdout
    if as_json:
        text = json.dumps(points_document(), indent=2)
        console.print(text, markup=False, highlight=False, soft_wrap=True)
        return
    console.print(_table() if _table_width() <= console.width else _blocks())


def _signals(s: Scenario) -> list[str]:
    return [x or "-" for x in s.signals]


def _name_width() -> int:
    names = [s.name for s in SCENARIOS] + [f"  {p}" for s in SCENARIOS for p in s.points]
    return max(map(len, names))


def _table_width() -> int:
    """The narrowest console the table fits whole: names, kinds and signals unbroken."""
    providers = max(len(p) for s in SCENARIOS for p in s.providers)
    signals = max(len(x) for s in SCENARIOS for x in _signals(s))
    return _name_width() + providers + signals + _DESCRIPTION_MIN + _TABLE_OVERHEAD


def _table() -> Table:
    table = Table(
        title="crashpoint injection table",
        box=box.SIMPLE_HEAD,
        show_lines=True,
        show_edge=False,
        pad_edge=False,
    )
    table.add_column("scenario / points", no_wrap=True, min_width=_name_width())
    table.add_column("providers", no_wrap=True)
    table.add_column("signals", no_wrap=True)
    table.add_column(
        "injection -> expected -> recovery", overflow="fold", min_width=_DESCRIPTION_MIN
    )
    for s in SCENARIOS:
        table.add_row(
            Text.assemble((s.name, "bold"), *(f"\n  {p}" for p in s.points)),
            "\n".join(s.providers),
            "\n".join(_signals(s)),
            f"{s.injection} -> {s.expected} -> {s.recovery}",
        )
    return table


def _blocks() -> RenderableType:
    parts: list[RenderableType] = [Text("crashpoint injection table", style="italic")]
    for s in SCENARIOS:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        grid.add_row("points", "\n".join(s.points))
        grid.add_row("providers", ", ".join(s.providers))
        grid.add_row("signals", ", ".join(_signals(s)))
        grid.add_row("injection", s.injection)
        grid.add_row("expected", s.expected)
        grid.add_row("recovery", s.recovery)
        parts += [Text(""), Text(s.name, style="bold"), Padding(grid, (0, 0, 0, 2), expand=False)]
    return Group(*parts)
