"""Rendered reports against stored golden copies (volatile parts removed).

Regenerate after an intended change with ``CRASHPOINT_UPDATE_GOLDEN=1 pytest
tests/unit/test_reports_golden.py`` and review the diff like any other code change.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

import pytest

from reports import load_results, write_all

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"
GOLDEN = FIXTURES / "golden"
UPDATE = os.environ.get("CRASHPOINT_UPDATE_GOLDEN") == "1"
WHEN = dt.datetime(2026, 11, 30, 4, 0, 0, tzinfo=dt.UTC)

#: Per fixture: the trial pages compared after normalising, besides every top-level file
#: (whose names are compared too, so a changed asset hash shows as a golden difference).
GOLDEN_PAGES = {
    "run_small": [
        "trials/crash_after_external_success.after_external_call.plain.SIGKILL.sqlite.process_20261130T032000-8b1d-80b6cd0a.html",
        "trials/reset_after_commit.toxic_reset_peer.idempotent.none.sqlite.process.html",
        "trials/ambiguous_timeout.toxic_timeout.plain.none.sqlite.process.html",
    ],
    "selftest": [
        "trials/fresh_key_per_attempt.crash_after_external_success.after_external_call.idempotent.SIGKILL.sqlite.process.html",
    ],
}
_VOLATILE = [
    (re.compile(r'(<time class="generated" datetime=")[^"]*(">)[^<]*(</time>)'), r"\1…\2…\3"),
    (re.compile(r"crashpoint \d+\.\d+\.\d+[^\s\"<]*"), "crashpoint X.Y.Z"),
    # sarif.json's source root: the directory the report was written from.
    (re.compile(r'("%SRCROOT%": \{\s*"uri": ")[^"]*(")'), r"\1…\2"),
]


def normalise(text: str) -> str:
    for pattern, repl in _VOLATILE:
        text = pattern.sub(repl, text)
    return text


def render(name: str, out: Path) -> Path:
    write_all(load_results(FIXTURES / f"{name}.json"), out, generated_at=WHEN)
    return out


def top_level(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir() if p.is_file()}


@pytest.mark.parametrize("name", sorted(GOLDEN_PAGES))
def test_report_matches_golden(name: str, tmp_path: Path) -> None:
    out = render(name, tmp_path / name)
    golden = GOLDEN / name
    wanted = sorted(top_level(out)) + GOLDEN_PAGES[name]
    if UPDATE:
        for old in golden.rglob("*") if golden.exists() else []:
            if old.is_file():
                old.unlink()
        for rel in wanted:
            target = golden / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(normalise((out / rel).read_text(encoding="utf-8")), "utf-8")
    assert top_level(golden) == top_level(out), "top-level files (asset hashes) differ"
    for rel in wanted:
        expected = (golden / rel).read_text(encoding="utf-8")
        actual = normalise((out / rel).read_text(encoding="utf-8"))
        assert actual == expected, f"{name}/{rel} differs from golden; see the module docstring"


def test_normalise_removes_only_volatile_parts() -> None:
    page = '<time class="generated" datetime="2026-11-30T04:00:00Z">2026-11-30T04:00:00Z</time>'
    assert normalise(page) == '<time class="generated" datetime="…">…</time>'
    assert normalise("crashpoint 0.1.0 · x") == "crashpoint X.Y.Z · x"
    assert normalise("crashpoint run --seed 1") == "crashpoint run --seed 1"
