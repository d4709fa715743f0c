"""JUnit XML: one testcase per trial, valid against the Jenkins/Ant schema."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reports import load_results, write_junit
from reports.junit import xml_text
from reports.model import Results

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"
XSD = FIXTURES / "junit.xsd"


def render(results: Results, tmp_path: Path) -> tuple[Path, ET.Element]:
    path = write_junit(results, tmp_path / "junit.xml")
    return path, ET.parse(path).getroot()  # noqa: S314 - our own output, written just above


@pytest.mark.parametrize("name", ["run_small.json", "selftest.json"])
def test_valid_against_the_junit_schema(name: str, tmp_path: Path) -> None:
    xmllint = shutil.which("xmllint")
    if xmllint is None:
        pytest.fail("xmllint is missing: apt-get install libxml2-utils")
    path, _ = render(load_results(FIXTURES / name), tmp_path)
    proc = subprocess.run(
        [xmllint, "--noout", "--schema", str(XSD), str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert "validates" in proc.stderr


def test_one_testcase_per_trial_with_verdict_elements(tmp_path: Path) -> None:
    results = load_results(FIXTURES / "run_small.json")
    _, root = render(results, tmp_path)
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == results.summary.total
    assert root.get("tests") == "18"
    assert root.get("failures") == str(results.summary.violated)
    assert root.get("errors") == str(results.summary.inconclusive)
    by_name = {(c.get("classname"), c.get("name")): c for c in cases}
    violated = by_name[
        (
            "crash_after_external_success",
            "after_external_call.plain.SIGKILL.sqlite.process@20261130T032000-8b1d",
        )
    ]
    failures = violated.findall("failure")
    assert [f.get("type") for f in failures] == ["no_duplicate_effect", "no_retry_while_unknown"]
    assert "2 committed effects for j-0001 at plain" in (failures[0].get("message") or "")
    body = failures[0].text or ""
    assert "arrivals:" in body
    assert "effects:" in body
    assert "ledger:" in body
    assert "#11 arrival at 1052.0 ms on provider:plain" in body
    assert "replay: crashpoint run" in body
    inconclusive = by_name[
        (
            "crash_during_external_call",
            "provider_hold_after_commit.unqueryable.SIGKILL.sqlite.process",
        )
    ]
    error = inconclusive.find("error")
    assert error is not None
    assert error.get("type") == "inconclusive"
    assert "no quiescence" in (error.get("message") or "")
    skipped = by_name[("ambiguous_timeout", "toxic_timeout.plain.none.sqlite.process")].find(
        "skipped"
    )
    assert skipped is not None
    assert "Toxiproxy unavailable" in (skipped.get("message") or "")
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert suites["ambiguous_timeout"].get("skipped") == "2"


def test_worker_text_is_escaped_and_round_trips(tmp_path: Path) -> None:
    results = load_results(FIXTURES / "run_small.json")
    path, root = render(results, tmp_path)
    raw = path.read_text(encoding="utf-8")
    assert "<script>" not in raw
    assert "<img" not in raw
    case = root.find("./testsuite/testcase[@classname='reset_after_commit']")
    assert case is not None
    failure = case.find("failure")
    assert failure is not None
    assert "<script>window.__xss = 1; alert(1)</script>" in (failure.get("message") or "")


def test_control_characters_cannot_break_the_xml(tmp_path: Path) -> None:
    results = load_results(FIXTURES / "run_small.json")
    noisy = dataclasses.replace(
        results.trials[-1], reason="\x1b[31mred\x1b[0m\x00 and \ufffe", verdict="inconclusive"
    )
    _path, root = render(dataclasses.replace(results, trials=(noisy,)), tmp_path)
    error = root.find("./testsuite/testcase/error")
    assert error is not None
    assert error.get("message") == "\\x1b[31mred\\x1b[0m\\x00 and \\xfffe"
    assert xml_text("tab\tnewline\nok") == "tab\tnewline\nok"


def test_violated_without_violation_entries_still_fails(tmp_path: Path) -> None:
    results = load_results(FIXTURES / "run_small.json")
    bare = dataclasses.replace(results.trials[0], verdict="violated", reason="oracle crashed")
    _, root = render(dataclasses.replace(results, trials=(bare,)), tmp_path)
    failure = root.find("./testsuite/testcase/failure")
    assert failure is not None
    assert failure.get("message") == "oracle crashed"
