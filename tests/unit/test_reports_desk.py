"""The review desk page, the traceability table, and the needs_review count in summary.md
and JUnit, drawn from a stored results document with ``trace`` and ``review`` rows."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from reports import load_results, write_html
from reports.desk import review_desk, trace_of
from reports.junit import junit_tree
from reports.markdown import markdown_summary
from reports.pages import page_stems

FIXTURES = Path(__file__).parent.parent / "fixtures" / "results"
HOSTILE = "<script>alert(1)</script>"


def _doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FIXTURES / "run_small.json").read_text(encoding="utf-8"))
    trial = next(t for t in doc["trials"] if t["provider"] == "unqueryable" and t["events"])
    trial["review"] = [
        {
            "job": "j-0001",
            "idempotency_key": f"effect-{HOSTILE}",
            "client_marker": "cm-j-0001",
            "action": "POST /v1/sends at svc",
            "provider": "svc",
            "at_event": 3,
            "at_wall": "2026-11-30T03:20:01.250+00:00",
            "last_error": "no_response:ReadTimeout",
            "review_reason": "reconcile: unqueryable (http_501)",
            "external_state": "last lookup at svc: HTTP 501: the provider cannot look it up",
            "provider_records": ["rec_svc_000001"],
            "attempts": 2,
            "events": [3, 4, 99_999],
        },
        "not a row",
        {"job": None},
    ]
    trial["trace"] = [
        {
            "job": "j-0001",
            "provider": "svc",
            "attempt": 1,
            "idempotency_key": None,
            "client_marker": "cm-j-0001",
            "external_id": "rec_svc_000001",
            "effect_id": 1,
            "recorded_ref": None,
            "event": 4,
        },
        {
            "job": "j-0002",
            "provider": "svc",
            "attempt": 1,
            "idempotency_key": None,
            "client_marker": "cm-j-0002",
            "external_id": "rec_svc_000002",
            "effect_id": 2,
            "recorded_ref": "rec_svc_000002",
            "event": 5,
        },
    ]
    return doc


def _results(tmp_path: Path, doc: dict[str, Any] | None = None) -> Any:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc or _doc()), encoding="utf-8")
    return load_results(path)


def test_the_desk_reads_only_well_formed_rows(tmp_path: Path) -> None:
    desk = review_desk(_results(tmp_path))
    assert [r.job for r in desk] == ["j-0001"]
    row = desk[0]
    # An index past the trial's events is dropped, never linked.
    assert row.events == (3, 4)
    assert row.at_t is not None
    assert row.provider_records == ("rec_svc_000001",)


def test_trace_rows_carry_the_run_id_and_whether_the_worker_kept_the_record(
    tmp_path: Path,
) -> None:
    results = _results(tmp_path)
    trial = next(t for t in results.trials if t.extra.get("trace"))
    rows = trace_of(trial, results.run_id)
    assert {r.run_id for r in rows} == {trial.run_id or results.run_id}
    assert [(r.key, r.traced) for r in rows] == [("cm-j-0001", False), ("cm-j-0002", True)]


def test_the_review_page_lists_each_job_with_its_evidence_and_links(tmp_path: Path) -> None:
    results = _results(tmp_path)
    write_html(results, tmp_path / "report")
    index = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert 'href="review.html"' in index
    assert 'data-review="1"' in index
    page = (tmp_path / "report" / "review.html").read_text(encoding="utf-8")
    assert page.count('class="review-job"') == 1
    for piece in ("key", "action", "time", "last_error", "external_state"):
        assert f'data-evidence="{piece}"' in page
    assert HOSTILE not in page
    assert "&lt;script&gt;" in page
    assert "no_response:ReadTimeout" in page
    assert "HTTP 501" in page
    trial = next(t for t in results.trials if t.extra.get("review"))
    stem = page_stems(results.trials)[trial.key]
    assert f'href="trials/{stem}.html#{stem}-ev-3"' in page
    # Every linked anchor exists on the trial page.
    trial_page = (tmp_path / "report" / "trials" / f"{stem}.html").read_text(encoding="utf-8")
    for anchor in set(re.findall(rf"trials/{re.escape(stem)}\.html#([\w.-]+-ev-\d+)", page)):
        assert f'id="{anchor}"' in trial_page
    assert 'class="data trace-table"' in trial_page
    assert "rec_svc_000002" in trial_page
    assert 'class="untraced"' in trial_page


def test_a_run_without_review_jobs_still_has_its_desk_page(tmp_path: Path) -> None:
    doc = _doc()
    for t in doc["trials"]:
        t.pop("review", None)
    write_html(_results(tmp_path, doc), tmp_path / "report")
    page = (tmp_path / "report" / "review.html").read_text(encoding="utf-8")
    assert "No job ended in needs_review" in page


def test_the_single_file_report_holds_the_desk_in_page(tmp_path: Path) -> None:
    write_html(_results(tmp_path), tmp_path / "one", self_contained=True)
    page = (tmp_path / "one" / "index.html").read_text(encoding="utf-8")
    assert 'id="review-desk"' in page
    anchors = re.findall(r'class="ev-ref" href="#([\w.-]+-ev-\d+)"', page)
    assert anchors
    assert all(f'id="{a}"' in page for a in anchors)


def test_summary_md_and_junit_carry_the_count(tmp_path: Path) -> None:
    results = _results(tmp_path)
    md = markdown_summary(results)
    assert "Review desk: 1 job in needs_review." in md
    assert "no\\_response:ReadTimeout" in md
    tree = junit_tree(results)
    props = {p.get("name"): p.get("value") for p in tree.getroot().iter("property")}
    assert props["needs_review"] == "1"
    outs = [e.text or "" for e in tree.getroot().iter("system-out")]
    assert sum("needs_review: j-0001" in o for o in outs) == 1
