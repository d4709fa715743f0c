"""Warnings: a check's findings reach results.json, the report and the exit code, and
never change a verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.contract.errors import ConfigError
from harness.contract.vocabulary import ExitCode
from harness.history import Event
from harness.observe import arrival_event
from harness.oracle import WARNINGS, TrialFacts, Violation, warning_json, warnings_of
from harness.oracle.facts import Record
from harness.results import exit_code, summarize
from reports import load_results, write_html
from reports.markdown import markdown_summary
from tests.unit.test_oracle import write

FIXTURES = Path(__file__).parent.parent / "fixtures" / "results"


def _every_write_is_suspect(record: Record, facts: TrialFacts) -> list[Violation]:
    return [
        Violation("suspect_write", a.job_id, f"write {a.id} looks odd", {"events": []})
        for a in record.arrivals
        if a.kind == "write"
    ]


def _facts() -> TrialFacts:
    return TrialFacts(jobs=("j-1",), provider_kinds={"svc": "idempotent"}, quiescent=True)


def test_no_check_registered_gives_no_warnings() -> None:
    assert warnings_of([Event(t=0.0, source="harness", kind="worker_start")], _facts()) == []


def test_a_registered_check_speaks_and_is_stored_under_its_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(WARNINGS, "suspect_write", _every_write_is_suspect)
    found = warnings_of([arrival_event(write(1.0))], _facts())
    assert [w.invariant for w in found] == ["suspect_write"]
    row = warning_json(found[0])
    assert row["warning"] == "suspect_write"
    assert "invariant" not in row
    assert row["job"] == "j-1"


def test_the_gate_fails_on_warnings_only_when_told_to() -> None:
    held = [{"verdict": "held", "warnings": [{"warning": "w"}]}, {"verdict": "held"}]
    summary = summarize(held)
    assert summary["warnings"] == 1
    assert summary["held"] == 2
    assert exit_code(summary, strict=False) == ExitCode.HELD
    assert exit_code(summary, strict=False, fail_on_warning=True) == ExitCode.VIOLATED
    clean = summarize([{"verdict": "held", "warnings": []}])
    assert exit_code(clean, strict=True, fail_on_warning=True) == ExitCode.HELD


def test_warnings_reach_the_report_the_summary_and_back(tmp_path: Path) -> None:
    doc = json.loads((FIXTURES / "run_small.json").read_text(encoding="utf-8"))
    trial = next(t for t in doc["trials"] if t["verdict"] == "held" and t["events"])
    trial["warnings"] = [
        {
            "warning": "untraced_effect",
            "job": "j-1",
            "message": "the effect has no external reference in the worker's log",
            "evidence": {"events": [0]},
        }
    ]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    results = load_results(path)
    warned = [t for t in results.trials if t.warnings]
    assert len(warned) == 1
    assert warned[0].verdict == "held"
    assert results.summary.warnings == 1
    md = markdown_summary(results)
    assert "### Warnings: 1" in md
    assert "untraced_effect" in md
    write_html(results, tmp_path / "report")
    page = next(
        p.read_text(encoding="utf-8")
        for p in (tmp_path / "report" / "trials").glob("*.html")
        if "untraced_effect" in p.read_text(encoding="utf-8")
    )
    assert 'class="warnings"' in page
    assert "no external reference" in page


def test_a_warning_pointing_outside_the_events_is_refused(tmp_path: Path) -> None:
    doc = json.loads((FIXTURES / "run_small.json").read_text(encoding="utf-8"))
    doc["trials"][0]["warnings"] = [{"warning": "w", "evidence": {"events": [10_000]}}]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"warnings\[0\]\.evidence\.events\[0\]"):
        load_results(path)
