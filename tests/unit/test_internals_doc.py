"""docs/internals.md names every module of the engine and of the parts.

The module map is only worth reading while it is whole: a module added without a line
there (or renamed away from its line) fails here, with the names to add.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("harness", "fake_providers", "scenarios", "reports")
GONE = (
    "harness/verdict.py",
    "harness/target.py",
    "harness/jobs.py",
    "harness/clock.py",
    "harness/killgate.py",
    "harness/failpoint_lines.py",
)


def _modules(package: str) -> list[str]:
    """Every module of ``package`` by its path inside it (``trial/state.py``); a
    package's ``__init__.py`` counts as named with its modules."""
    base = ROOT / package
    return sorted(
        p.relative_to(base).as_posix()
        for p in base.rglob("*.py")
        if p.name != "__init__.py" and "templates" not in p.parts
    )


def _map() -> dict[str, str]:
    """The module map ("Where each concept lives"): each package's block of it."""
    text = (ROOT / "docs" / "internals.md").read_text()
    section = text.split("## Where each concept lives", 1)[1].split("\n## ", 1)[0]
    blocks: dict[str, str] = {}
    current = None
    for line in section.splitlines():
        head = line.split("/", 1)[0]
        if head in PACKAGES and line.startswith(f"{head}/"):
            current = head
        elif current is not None:
            blocks[current] = blocks.get(current, "") + line + "\n"
    return blocks


def _named(module: str, block: str) -> bool:
    return re.search(rf"(?<![\w/.]){re.escape(module)}(?!\w)", block) is not None


def test_internals_names_every_module_in_its_package_block() -> None:
    blocks = _map()
    assert sorted(blocks) == sorted(PACKAGES), "the map has one block per package"
    missing = [
        f"{package}/{m}"
        for package in PACKAGES
        for m in _modules(package)
        if not _named(m, blocks[package])
    ]
    assert missing == [], "docs/internals.md does not name these modules: " + ", ".join(missing)


def test_internals_names_no_module_that_is_gone() -> None:
    text = (ROOT / "docs" / "internals.md").read_text()
    assert [name for name in GONE if name in text] == []
