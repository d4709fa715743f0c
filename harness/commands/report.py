"""``crashpoint report``: merge stored ``results.json`` files (shards, repeated runs) and
write the HTML, JUnit and Markdown again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.commands.console import stdout
from reports import build_report
from reports.dedupe import dropped_line


def report_command(paths: Sequence[Path], *, out: Path, self_contained: bool) -> None:
    merged = build_report(list(paths), out, self_contained=self_contained)
    # A shard run twice (a replaced pod): which copy of each result was left out.
    for dropped in merged.extra.get("duplicates_dropped") or ():
        stdout.print(
            f"report: {dropped_line(dropped)}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    stdout.print(
        f"{len(merged.trials)} trials -> {out / 'index.html'}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
