"""A fresh trial and the recheck of its stored results judge alike, invariant by invariant.

``crashpoint recheck`` judges the stored events and facts through the same judgement
(``harness.oracle.judge``) as the run that stored them; a fact the results leave out
(``job_steps`` once was) or a rule written twice shows up here as a trial whose verdict,
violations or unjudged notes moved. One cell of every scenario of the table, on the
reference worker, and one mutant that violates.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.applicable import split
from harness.plan import cells
from tests.process.clikit import run

pytestmark = pytest.mark.process


def _one_cell_each() -> list[str]:
    """Filters that leave one point of every scenario (each point's signals and the
    idempotent provider's cells only: a few cells a scenario, never the whole row)."""
    first: dict[str, str] = {}
    for cell in cells(providers=("idempotent",)):
        first.setdefault(cell.scenario.name, cell.point)
    args = ["--provider", "idempotent"]
    for scenario, point in first.items():
        args += ["--scenario", scenario, "--point", point]
    return args


def _judged(trial: dict[str, Any]) -> tuple[Any, ...]:
    found = sorted((v["invariant"], v["job"]) for v in trial["violations"])
    return trial["verdict"], found, sorted(trial.get("unjudged") or {})


def _round_trip(out: Path, tmp_path: Path) -> list[dict[str, Any]]:
    again = run(
        [str(out / "results.json"), "--out", str(out / "recheck")], tmp_path, command="recheck"
    )
    assert again.returncode in (0, 1), again.stdout + again.stderr
    assert "no verdict changes" in again.stdout + again.stderr
    fresh = json.loads((out / "results.json").read_text())["trials"]
    rechecked = {
        t["id"]: t for t in json.loads((out / "recheck" / "results.json").read_text())["trials"]
    }
    for trial in fresh:
        assert _judged(rechecked[trial["id"]]) == _judged(trial), trial["id"]
    return fresh


def test_every_scenario_judged_fresh_is_judged_alike_by_recheck(tmp_path: Path) -> None:
    out = tmp_path / "reference"
    ran = run(["--target", "reference", *_one_cell_each(), "-j", "4", "--out", str(out)], tmp_path)
    assert ran.returncode in (0, 3), ran.stdout + ran.stderr
    fresh = _round_trip(out, tmp_path)
    # Every row the reference can play (broker_restart cannot: its queue is its ledger).
    applicable, _ = split(cells(), None)
    assert {t["scenario"] for t in fresh} == {c.scenario.name for c in applicable}
    assert any(t["verdict"] == "held" and t["facts"]["job_steps"] for t in fresh)


#: Mutants and the one cell each that catches it: a payload that changes on retry, and a
#: multi-step job restarted from its first step (judged only with the stored job_steps).
MUTANT_CELLS = {
    "timestamp_in_payload": ("provider_error_before_commit", "fail_once", "idempotent"),
    "restart_from_step_one": ("multi_step_job", "after_local_write@ticket", "plain"),
}


@pytest.mark.parametrize("mutant", sorted(MUTANT_CELLS))
def test_a_mutants_violation_is_judged_alike_by_recheck(mutant: str, tmp_path: Path) -> None:
    scenario, point, provider = MUTANT_CELLS[mutant]
    out = tmp_path / "mutant"
    args = ["--mutant", mutant, "--scenario", scenario, "--point", point]
    args += ["--provider", provider, "--seed", "5"]
    ran = run([*args, "--out", str(out)], tmp_path)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    fresh = _round_trip(out, tmp_path)
    assert {t["verdict"] for t in fresh} == {"violated"}
