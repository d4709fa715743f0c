"""One line of ``crashpoint check-config``: a mark and a finding, and what to fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Mark = Literal["ok", "fail", "warn", "skip"]
OK: Mark = "ok"
#: Something to fix before a run can say anything: check-config exits 2.
FAIL: Mark = "fail"
#: A run works, but some cells will come out inconclusive.
WARN: Mark = "warn"
#: Optional and not declared.
SKIP: Mark = "skip"
GLYPHS: dict[Mark, tuple[str, str]] = {
    OK: ("✓", "green"),
    FAIL: ("✗", "bold red"),
    WARN: ("!", "yellow"),
    SKIP: ("-", "dim"),
}


@dataclass(frozen=True)
class Line:
    """One finding, and what to do about it."""

    mark: Mark
    text: str
    fix: str = ""
