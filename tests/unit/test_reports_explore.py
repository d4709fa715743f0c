"""The exploration page: schedules tried, the shrunk finding on its timeline, flaky apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reports import load_results, write_html

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"


def _schedule(index: int, status: str, trial: str, rate: str) -> dict[str, Any]:
    return {
        "index": index,
        "phase": "generate",
        "status": status,
        "reproduced": rate,
        "invariants": ["no_duplicate_effect"] if status != "held" else [],
        "trials": [trial],
        "size": {"faults": 1, "jobs": 1},
        "describe": f"schedule <{index}>",
        "schedule": {"faults": [{"at": "after_external_call", "hit": 1, "action": "kill"}]},
    }


def _with_exploration(tmp_path: Path) -> Path:
    doc = json.loads((FIXTURES / "run_small.json").read_text())
    violated = next(t for t in doc["trials"] if t["verdict"] == "violated")
    held = next(t for t in doc["trials"] if t["verdict"] == "held")
    doc["exploration"] = {
        "mode": "explore",
        "budget": 5,
        "seed": 1,
        "confirm": "2/3",
        "command": "crashpoint explore --seed 1 --budget 5",
        "examples_needed": 2,
        "trials_run": 4,
        "trials_to_detection": 2,
        "schedules": [
            _schedule(1, "held", held["id"], "0/1"),
            _schedule(2, "failing", violated["id"], "2/2"),
            _schedule(3, "flaky", held["id"], "1/3"),
        ],
        "finding": {**_schedule(2, "failing", violated["id"], "2/2"), "file": "finding.json"},
        "flaky": [{**_schedule(3, "flaky", held["id"], "1/3"), "file": "flaky-1.json"}],
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    return path


def test_an_exploration_gets_its_page_linked_from_the_index(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_html(load_results(_with_exploration(tmp_path)), out)
    page = (out / "exploration.html").read_text()
    assert 'data-explore="schedules">3<' in page
    assert "Finding, shrunk" in page
    assert "Flaky findings" in page
    assert "flaky-1.json" in page
    # The finding's timeline is drawn, and worker text is escaped.
    assert 'class="timeline"' in page
    assert "schedule &lt;2&gt;" in page
    assert 'href="exploration.html"' in (out / "index.html").read_text()


def test_a_run_without_exploration_has_no_page(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_html(load_results(_with_exploration(tmp_path)), out)
    write_html(load_results(FIXTURES / "run_small.json"), out)
    assert not (out / "exploration.html").exists()
    assert "exploration" not in (out / "index.html").read_text()


def test_the_single_file_report_holds_the_exploration(tmp_path: Path) -> None:
    out = tmp_path / "one"
    write_html(load_results(_with_exploration(tmp_path)), out, self_contained=True)
    assert 'id="exploration"' in (out / "index.html").read_text()


def test_every_finding_gets_its_block_on_the_page(tmp_path: Path) -> None:
    path = _with_exploration(tmp_path)
    doc = json.loads(path.read_text())
    section = doc["exploration"]
    second = {
        **section["schedules"][1],
        "invariants": ["fenced_writes"],
        "file": "finding-2.json",
        "regression_test": "test_crashpoint_finding_2.py",
        "replay": "crashpoint replay out/finding-2.json",
    }
    section["findings"] = [section["finding"], second]
    path.write_text(json.dumps(doc))
    out = tmp_path / "out"
    write_html(load_results(path), out)
    page = (out / "exploration.html").read_text()
    assert 'data-explore="findings">2 findings' in page
    assert "Finding 1, shrunk: no_duplicate_effect" in page
    assert "Finding 2, shrunk: fenced_writes" in page
    assert "finding-2.json" in page
    assert "test_crashpoint_finding_2.py" in page
    assert 'id="h-finding-2"' in page
    assert "2 findings" in (out / "index.html").read_text()
