"""JUnit XML in the common Jenkins/Ant shape (validated in tests against
``tests/fixtures/results/junit.xsd``): one ``<testsuite>`` per scenario, one
``<testcase>`` per trial; violations are ``<failure>``, inconclusive trials ``<error>``,
skipped trials ``<skipped>``.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from harness.contract.vocabulary import Verdict
from reports.desk import review_desk, review_of
from reports.model import Results, TrialRow, ViolationRow
from reports.timeline import event_title

# XML 1.0 cannot carry most control characters at all, not even escaped; worker output
# (ANSI colours, NULs from a crashed writer) would make the whole file unreadable.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ANT_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")


def xml_text(value: str) -> str:
    """``value`` with characters XML 1.0 forbids shown as ``\\xNN`` escapes."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", value)


def junit_tree(results: Results) -> ET.ElementTree[ET.Element]:
    suites = ET.Element("testsuites", name=f"crashpoint {xml_text(results.run_id)}")
    by_scenario: dict[str, list[TrialRow]] = {}
    for trial in results.trials:
        by_scenario.setdefault(trial.scenario, []).append(trial)
    totals = {"tests": 0, "failures": 0, "errors": 0}
    total_time = 0.0
    for scenario, trials in by_scenario.items():
        failures = sum(1 for t in trials if t.verdict == Verdict.VIOLATED)
        errors = sum(1 for t in trials if t.verdict == Verdict.INCONCLUSIVE)
        time_s = sum(t.duration_s for t in trials)
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=xml_text(scenario),
            tests=str(len(trials)),
            failures=str(failures),
            errors=str(errors),
            skipped=str(sum(1 for t in trials if t.verdict == Verdict.SKIPPED)),
            time=f"{time_s:.3f}",
        )
        stamp = _ant_timestamp(results.started_at)
        if stamp:
            suite.set("timestamp", stamp)
        props = ET.SubElement(suite, "properties")
        for name, value in _properties(results):
            ET.SubElement(props, "property", name=name, value=xml_text(value))
        for trial in trials:
            suite.append(_testcase(trial))
        totals["tests"] += len(trials)
        totals["failures"] += failures
        totals["errors"] += errors
        total_time += time_s
    for key, count in totals.items():
        suites.set(key, str(count))
    suites.set("time", f"{total_time:.3f}")
    ET.indent(suites)
    return ET.ElementTree(suites)


def write_junit(results: Results, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    junit_tree(results).write(tmp, encoding="UTF-8", xml_declaration=True)
    with tmp.open("a", encoding="utf-8") as f:
        f.write("\n")
    tmp.replace(path)
    return path


def _ant_timestamp(iso: str | None) -> str | None:
    """Ant's schema wants ``YYYY-MM-DDTHH:MM:SS`` exactly: no zone, no fraction."""
    match = _ANT_TIME.match(iso or "")
    return match.group() if match else None


def _properties(results: Results) -> list[tuple[str, str]]:
    props = [("run_id", results.run_id), ("target", results.target.name)]
    if results.seed is not None:
        props.append(("seed", str(results.seed)))
    if results.target.mutant:
        props.append(("mutant", results.target.mutant))
    props += [(f"environment.{k}", v) for k, v in results.environment.items() if v is not None]
    # Jobs a person must decide: a held run can still leave work on the review desk.
    props.append(("needs_review", str(len(review_desk(results)))))
    return props


def _testcase(trial: TrialRow) -> ET.Element:
    case = ET.Element(
        "testcase",
        classname=xml_text(trial.scenario),
        name=xml_text(trial.name if trial.run_id is None else f"{trial.name}@{trial.run_id}"),
        time=f"{trial.duration_s:.3f}",
    )
    if trial.verdict == Verdict.SKIPPED:
        ET.SubElement(case, "skipped", message=xml_text(trial.reason or "skipped"))
    elif trial.verdict == Verdict.INCONCLUSIVE:
        error = ET.SubElement(
            case, "error", type="inconclusive", message=xml_text(trial.reason or "inconclusive")
        )
        error.text = xml_text(f"{trial.reason or 'inconclusive'}\nreplay: {trial.replay}")
    if trial.verdict == Verdict.VIOLATED and not trial.violations:
        # Counted as a failure in the suite totals, so it must show as one.
        failure = ET.SubElement(
            case, "failure", type="violated", message=xml_text(trial.reason or "violated")
        )
        failure.text = xml_text(f"{trial.reason or 'violated'}\nreplay: {trial.replay}")
    for violation in trial.violations:
        failure = ET.SubElement(
            case,
            "failure",
            type=xml_text(violation.invariant),
            message=xml_text(_headline(violation)),
        )
        failure.text = xml_text(_evidence_text(trial, violation))
    out = [f"injection: {trial.injection_point}", f"reached: {str(trial.reached).lower()}"]
    if trial.verdict == Verdict.HELD and not trial.reached:
        out.append("note: held, but the injection was not reached; the cell is not covered")
    out += [
        f"needs_review: {r.job} (key {r.key or 'none'}; {r.action}; "
        f"last error: {r.last_error or 'none recorded'})"
        for r in review_of(trial)
    ]
    out.append(f"replay: {trial.replay}")
    ET.SubElement(case, "system-out").text = xml_text("\n".join(out))
    return case


def _headline(v: ViolationRow) -> str:
    return f"{v.invariant}: {v.message}" if v.message else v.invariant


def _evidence_text(trial: TrialRow, v: ViolationRow) -> str:
    lines = [_headline(v)]
    if v.job:
        lines.append(f"job: {v.job}")
    for label, rows in (
        ("arrivals", v.evidence.arrivals),
        ("effects", v.evidence.effects),
        ("ledger", v.evidence.ledger),
    ):
        if rows:
            lines.append(f"{label}:")
            lines += [f"  {json.dumps(dict(r), sort_keys=True, default=str)}" for r in rows]
    if v.evidence.events:
        lines.append("events:")
        lines += [
            "  " + event_title(trial.events[i]).replace("\n", " | ") for i in v.evidence.events
        ]
    lines.append(f"replay: {trial.replay}")
    return "\n".join(lines)
