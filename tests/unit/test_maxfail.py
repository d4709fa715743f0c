"""``--maxfail``: the cells after the Nth violation are refused, and only violations count."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from test_kill_admission import result

from harness.cli import main
from harness.contract.vocabulary import Verdict
from harness.maxfail import STOPPED, StopAfterFailures
from harness.plan import Cell, select_cells


def _cells() -> list[Cell]:
    return select_cells(scenarios=["crash_after_external_success"])


def test_cells_run_until_the_limit_then_none_start() -> None:
    cells = _cells()
    gate = StopAfterFailures(2)
    assert list(gate.order(cells, 2)) == cells
    gate.record(result(cells[0], Verdict.VIOLATED))
    assert gate.admit(cells[1]) is None
    for verdict in (Verdict.HELD, Verdict.INCONCLUSIVE, Verdict.SKIPPED):
        gate.record(result(cells[1], verdict))
    assert gate.admit(cells[2]) is None
    gate.record(result(cells[2], Verdict.VIOLATED))
    reason = gate.admit(cells[3])
    assert reason is not None
    assert reason.startswith(STOPPED)
    assert f"--maxfail 2 reached (first violated: {cells[0].id})" in reason


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        StopAfterFailures(0)


def test_maxfail_below_one_is_a_usage_error_in_one_line() -> None:
    result = CliRunner().invoke(main, ["run", "--maxfail", "0"])
    assert result.exit_code == 2
    assert "--maxfail" in result.output
    assert "must be at least 1, got 0" in result.output
