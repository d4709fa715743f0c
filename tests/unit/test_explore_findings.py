"""What explore saves per kind of failure, and what replay's counts mean: no process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.commands.explore import _print_outcome, _save_findings, finding_files
from harness.commands.replay import reproduction
from harness.contract.vocabulary import ExitCode
from harness.exploration.evaluation import Confirm, Evaluation, Exploration, Finding, Outcome
from harness.schedule import FaultStep, Schedule, load


def _failing(index: int, at: str, invariants: tuple[str, ...]) -> Evaluation:
    schedule = Schedule(
        provider="plain",
        faults=(FaultStep(at=at, action="kill"),),
        jobs=1,
        workers=1,
        mutant="fresh_key_per_attempt",
    )
    ev = Evaluation(index, schedule, "generate", Confirm(1, 1))
    ev.outcomes.append(Outcome("violated", invariants, {"id": f"explore.s{index:04d}"}))
    return ev


def _exploration() -> Exploration:
    a = _failing(3, "after_external_call", ("no_duplicate_effect",))
    b = _failing(7, "before_external_call", ("bounded_retries", "stable_key_and_payload"))
    findings = [Finding(a.kind, a, a, 3), Finding(b.kind, b, b, 7)]
    return Exploration("explore", [a, b], 3, a, findings)


def _doc(found: Exploration) -> dict[str, Any]:
    trials = [o.trial for e in found.evaluations for o in e.outcomes]
    return {
        "trials": trials,
        "exploration": {"finding": None, "findings": [], "flaky": []},
        "summary": {"held": 0, "violated": 2, "inconclusive": 0},
    }


def test_the_first_finding_keeps_its_names_and_the_others_are_numbered() -> None:
    assert finding_files(1) == ("finding.json", "test_crashpoint_finding.py")
    assert finding_files(2) == ("finding-2.json", "test_crashpoint_finding_2.py")


def test_each_finding_is_saved_with_its_regression_test(tmp_path: Path) -> None:
    found = _exploration()
    doc = _doc(found)
    _save_findings(found, doc, tmp_path, seed=1, config=None)
    section = doc["exploration"]
    assert [f["file"] for f in section["findings"]] == ["finding.json", "finding-2.json"]
    assert section["finding"] == section["findings"][0]
    assert [f["invariants"] for f in section["findings"]] == [
        ["no_duplicate_effect"],
        ["bounded_retries", "stable_key_and_payload"],
    ]
    assert section["findings"][1]["kind"] == ["bounded_retries", "stable_key_and_payload"]
    assert section["findings"][1]["examples_needed"] == 7
    assert load(tmp_path / "finding-2.json").faults[0].at == "before_external_call"
    test = (tmp_path / "test_crashpoint_finding_2.py").read_text()
    assert "def test_crashpoint_finding_2(crashpoint):" in test
    assert "bounded_retries, stable_key_and_payload" in test
    # Each trial points at the schedule file that replays it.
    replays = {t["id"]: t["replay"] for t in doc["trials"]}
    assert replays["explore.s0007"].endswith("finding-2.json")
    json.dumps(doc)  # results.json can hold it


def test_what_an_earlier_exploration_saved_there_is_not_left_to_pass_for_this_ones(
    tmp_path: Path,
) -> None:
    earlier = ["finding-3.json", "test_crashpoint_finding_3.py", "flaky-1.json", "finding.json"]
    for name in earlier:
        (tmp_path / name).write_text("from an earlier run")
    (tmp_path / "notes.txt").write_text("the user's own")
    found = _exploration()
    _save_findings(found, _doc(found), tmp_path, seed=1, config=None)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "finding-2.json",
        "finding.json",
        "notes.txt",
        "test_crashpoint_finding.py",
        "test_crashpoint_finding_2.py",
    ]
    assert (tmp_path / "finding.json").read_text() != "from an earlier run"


def test_the_summary_lists_every_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = _exploration()
    doc = _doc(found)
    _print_outcome(found, doc, tmp_path)
    err = capsys.readouterr().err
    assert "2 findings" in err
    assert "finding 1 after 3 example(s): no_duplicate_effect" in err
    assert "finding 2 after 7 example(s): bounded_retries, stable_key_and_payload" in err
    assert f"replay: crashpoint replay {tmp_path / 'finding-2.json'}" in err


@pytest.mark.parametrize(
    ("tries", "violated", "held", "code", "says"),
    [
        (5, 1, 4, ExitCode.VIOLATED, "reproduced 1/5 (20%): the finding reproduces"),
        (5, 5, 0, ExitCode.VIOLATED, "reproduced 5/5 (100%)"),
        (5, 2, 1, ExitCode.VIOLATED, "(2 inconclusive)"),
        (5, 0, 5, ExitCode.HELD, "reproduced 0/5: the finding did not reproduce in 5 tries"),
        (5, 0, 2, ExitCode.HELD, "did not reproduce in 5 tries (3 inconclusive)"),
        (5, 0, 0, ExitCode.INCONCLUSIVE, "every try was inconclusive"),
    ],
)
def test_a_replay_exits_1_when_it_reproduced_at_all(
    tries: int, violated: int, held: int, code: ExitCode, says: str
) -> None:
    got, line = reproduction(tries, violated, held)
    assert got == code
    assert says in line
