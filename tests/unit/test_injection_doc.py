"""docs/injection-table.md names every row of the table, each with what a target must
declare and where the row comes from (a row added without its page entry fails here)."""

from __future__ import annotations

from pathlib import Path

from scenarios.table import SCENARIOS

DOC = Path(__file__).parents[2] / "docs" / "injection-table.md"


def test_every_row_of_the_table_has_its_line() -> None:
    rows = {
        line.split("|")[1].strip().strip("`"): line
        for line in DOC.read_text(encoding="utf-8").splitlines()
        if line.startswith("| `")
    }
    missing = [s.name for s in SCENARIOS if s.name not in rows]
    assert missing == [], f"docs/injection-table.md has no row for {missing}"
    for s in SCENARIOS:
        cells = [c.strip() for c in rows[s.name].split("|")[1:-1]]
        assert len(cells) == 5, f"{s.name}: five columns: {cells}"
        assert all(cells), f"{s.name}: fill every column: {cells}"
