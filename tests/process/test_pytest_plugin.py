"""``pytest --crashpoint`` and the ``crashpoint`` fixture, in real pytest processes.

Each test writes a small project with pytester and runs pytest on it in a subprocess, as
a team's CI would: the worker under test is the Node.js example (correct and buggy), the
custom scenario is the one docs/pytest.md shows, taken from the page itself.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

# The same Node.js the command-target tests use (skips, or fails under require-infra).
from test_command_target import node  # noqa: F401

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "node-worker"
DOCS = ROOT / "docs" / "pytest.md"
TIMEOUT_S = 240
#: Two cells of the Node example, one that the buggy variant breaks and one it survives.
CELLS = [
    "--crashpoint-scenario=crash_after_external_success",
    "--crashpoint-scenario=crash_before_external_call",
    "--crashpoint-signal=SIGKILL",
    "--crashpoint-seed=7",
    # The billing provider's cells; the mailer has cells of its own.
    "--crashpoint-provider=billing",
]
BROKEN = "crash_after_external_success[after_external_call-billing-SIGKILL]"
SURVIVED = "crash_before_external_call[before_external_call-billing-SIGKILL]"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """An empty project with its own rootdir (an ini file), so nothing of ours leaks in."""
    pytester.makeini("[pytest]\n")
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*args, timeout=TIMEOUT_S)


def verdicts(out: Path) -> dict[str, str]:
    doc: dict[str, Any] = json.loads((out / "results.json").read_text())
    return {t["id"]: t["verdict"] for t in doc["trials"]}


def junit_cases(path: Path) -> dict[str, str]:
    """Test case name -> passed / failed / skipped / error."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):  # noqa: S314 (our own file)
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        out[case.attrib["name"]] = kinds[0] if kinds else "passed"
    return out


@pytest.mark.usefixtures("node")
def test_the_correct_node_worker_passes(project: pytest.Pytester) -> None:
    good = run(project, f"--crashpoint={EXAMPLE / 'crashpoint.toml'}", *CELLS)
    good.assert_outcomes(passed=2)
    assert verdicts(project.path / "crashpoint-out") == {
        f"{cell}.billing.SIGKILL.sqlite.process": "held"
        for cell in (
            "crash_after_external_success.after_external_call",
            "crash_before_external_call.before_external_call",
        )
    }


@pytest.mark.usefixtures("node")
def test_the_buggy_node_worker_fails_naming_the_invariant_alike_under_xdist(
    project: pytest.Pytester,
) -> None:
    target = f"--crashpoint={EXAMPLE / 'crashpoint-buggy.toml'}"
    serial = run(
        project,
        target,
        *CELLS,
        "-p",
        "xdist",
        "-n",
        "0",
        "--junitxml=serial.xml",
        "--crashpoint-out=serial",
        "--durations=0",
    )
    serial.assert_outcomes(passed=1, failed=1)
    text = serial.stdout.str()
    assert re.search(rf"FAILED \S+crashpoint-buggy\.toml::{re.escape(BROKEN)}", text)
    assert f"{BROKEN}: violated" in text
    # The violation, its evidence, where to look and how to run it again.
    assert "no_duplicate_effect (job j-0001)" in text
    assert "effects: 2" in text
    assert "signal=SIGKILL" in text
    assert f"trial page: {project.path / 'serial' / 'trials'}" in text
    assert "replay: crashpoint run -c " in text
    assert "--seed 7" in text
    assert "crashpoint: 2 trials: 1 held, 1 violated" in text

    spread = run(
        project,
        target,
        *CELLS,
        "-p",
        "xdist",
        "-n",
        "2",
        "--junitxml=spread.xml",
        "--crashpoint-out=spread",
    )
    spread.assert_outcomes(passed=1, failed=1)
    assert "2 workers [2 items]" in spread.stdout.str()

    # One testcase per cell, the same outcome whichever process ran it.
    assert junit_cases(project.path / "serial.xml") == {BROKEN: "failure", SURVIVED: "passed"}
    assert junit_cases(project.path / "spread.xml") == junit_cases(project.path / "serial.xml")
    # --durations reports cells like any test.
    assert re.search(rf"\d+\.\d+s call\s+\S+::{re.escape(SURVIVED)}", serial.stdout.str())

    # One run directory per session: the workers' shards merged, then gone.
    spread_out = project.path / "spread"
    assert verdicts(spread_out) == verdicts(project.path / "serial")
    assert sorted(verdicts(spread_out).values()) == ["held", "violated"]
    assert not (spread_out / ".xdist").exists()
    doc = json.loads((spread_out / "results.json").read_text())
    assert doc["seed"] == 7
    assert "merged" not in doc["run_id"], "workers record under the controller's run id"
    assert (spread_out / "index.html").is_file()
    assert len(list((spread_out / "trials").glob("*.html"))) == 2
    assert "crashpoint: 2 trials: 1 held, 1 violated" in spread.stdout.str()

    # --lf (the cache the serial run left) reruns only the broken cell.
    last_failed = run(project, target, *CELLS, "--lf", "--co", "-q")
    assert _collected(last_failed) == [BROKEN]


def test_k_selects_cells_and_bad_options_are_usage_errors(project: pytest.Pytester) -> None:
    listed = run(project, "--crashpoint=reference", "--co", "-q", "-k", "crash_before and SIGTERM")
    assert _collected(listed) == [
        "crash_before_external_call[before_external_call-idempotent-SIGTERM]",
        "crash_before_external_call[before_external_call-plain-SIGTERM]",
        "crash_before_external_call[before_external_call-unqueryable-SIGTERM]",
    ]
    # The same filters from the ini file.
    project.makeini(
        "[pytest]\ncrashpoint_scenarios =\n    crash_after_external_success\n"
        "crashpoint_signals = SIGKILL\n"
    )
    from_ini = run(project, "--crashpoint=reference", "--co", "-q")
    assert len(_collected(from_ini)) == 3
    assert all(n.startswith("crash_after_external_success[") for n in _collected(from_ini))

    wrong = run(project, "--crashpoint=reference", "--crashpoint-scenario=nope", "--co")
    assert wrong.ret == pytest.ExitCode.USAGE_ERROR
    assert "crashpoint: --scenario 'nope' is unknown" in wrong.stderr.str()
    nothing = run(project, "--crashpoint", "--co")
    assert nothing.ret == pytest.ExitCode.USAGE_ERROR
    assert "no crashpoint.toml" in nothing.stderr.str()


def _documented_example() -> str:
    """The custom scenario of docs/pytest.md, exactly as the page shows it."""
    text = DOCS.read_text()
    marker = text.index("<!-- the test suite runs this example")
    match = re.compile(r"```python\n(.*?)```", re.S).search(text, marker)
    assert match is not None
    return match.group(1)


@pytest.mark.usefixtures("node")
def test_the_documented_custom_scenario_runs_and_its_page_draws_the_timeline(
    project: pytest.Pytester,
) -> None:
    example = _documented_example()
    assert len(example.strip().splitlines()) <= 10
    project.makepyfile(test_recovery=example)

    held = run(project, "--crashpoint-config=reference", "-p", "no:cacheprovider")
    held.assert_outcomes(passed=1)
    out = project.path / "crashpoint-out"
    (trial,) = json.loads((out / "results.json").read_text())["trials"]
    assert trial["scenario"] == "test_recovery.py::test_recovering_worker_dies_too"
    assert trial["verdict"] == "held"
    assert trial["reached"] is True
    kinds = [(e["source"], e["kind"]) for e in trial["events"]]
    assert kinds.count(("supervisor", "signal")) == 2
    (page,) = (out / "trials").glob("*.html")
    html = page.read_text()
    assert 'class="timeline"' in html
    for lane in ("worker:w1", "worker:w2", "worker:w3"):
        assert lane in html
    assert "after_reconcile" in html
    assert "SIGKILL" in html

    # The same ten lines catch the Node example's bug.
    caught = run(
        project,
        f"--crashpoint-config={EXAMPLE / 'crashpoint-buggy.toml'}",
        "-p",
        "no:cacheprovider",
    )
    caught.assert_outcomes(failed=1)
    text = caught.stdout.str()
    assert "test_recovering_worker_dies_too: violated" in text
    assert "no_duplicate_effect (job j-0001)" in text
    assert "trial page: " in text
    assert "replay: pytest test_recovery.py::test_recovering_worker_dies_too" in text


def test_nothing_is_imported_or_started_when_off(project: pytest.Pytester) -> None:
    project.makeconftest(
        """
        import json, sys

        def pytest_sessionfinish(session):
            with open("modules.json", "w") as f:
                json.dump(sorted(sys.modules), f)
        """
    )
    project.makepyfile(test_plain="def test_plain():\n    assert True\n")
    done = run(project, "-p", "no:cacheprovider")
    done.assert_outcomes(passed=1)
    modules = json.loads((project.path / "modules.json").read_text())
    ours = {m for m in modules if m.split(".")[0] in ("harness", "reports", "scenarios")}
    assert ours <= {
        "harness",
        "harness.contract",
        "harness.contract.vocabulary",
        "harness.pytest_plugin",
    }, sorted(ours)
    assert not (project.path / "crashpoint-out").exists()


def _collected(result: pytest.RunResult) -> list[str]:
    """The item names ``--co -q`` listed."""
    return [
        line.split("::", 1)[1]
        for line in result.stdout.lines
        if "::" in line and not line.startswith(" ")
    ]


RQ = ROOT / "examples" / "rq-worker"


@pytest.fixture
def redis_server(pytestconfig: pytest.Config) -> None:
    """The RQ example's broker (scripts/install-infra.sh redis starts it)."""
    import socket

    from harness.pytest_plugin import missing

    with socket.socket() as s:
        s.settimeout(1.0)
        if s.connect_ex(("127.0.0.1", 6379)) != 0:
            missing(pytestconfig, "Redis on 127.0.0.1:6379 (bash scripts/install-infra.sh redis)")


@pytest.mark.usefixtures("redis_server")
def test_a_real_framework_worker_passes_and_its_buggy_variant_fails_naming_the_invariant(
    project: pytest.Pytester,
) -> None:
    # The RQ example: a Python worker on a real queue library, two providers in one job.
    # About 20 s quiet, up to 60 s under stress-ng --cpu 2: two pytest sessions, each
    # starting the providers, a Redis per trial and the RQ workers.
    cells = ["--crashpoint-scenario=crash_after_external_success", "--crashpoint-seed=7"]
    cells += ["--crashpoint-signal=SIGKILL"]
    good = run(project, f"--crashpoint={RQ / 'crashpoint.toml'}", *cells)
    outcomes = good.parseoutcomes()
    assert outcomes.get("passed", 0) >= 2, good.stdout.str()
    assert "failed" not in outcomes, good.stdout.str()

    bad = run(project, f"--crashpoint={RQ / 'crashpoint-buggy-new-key-on-retry.toml'}", *cells)
    assert bad.parseoutcomes().get("failed", 0) >= 1, bad.stdout.str()
    assert re.search(r"no_duplicate_effect \(job j-\d+\)", bad.stdout.str())
