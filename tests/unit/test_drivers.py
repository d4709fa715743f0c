"""The driver registry: every row of the injection table is played, none twice (no processes)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from harness.drivers import DRIVERS, DriverRegistry, NoDriver, driver_for, network, provider
from harness.plan import Cell
from harness.runner import RunSpec, run_one
from harness.trial import Trial
from scenarios.table import SCENARIOS, Scenario


def _noop(trial: Trial) -> frozenset[str]:
    return frozenset()


def _other(trial: Trial) -> frozenset[str]:
    return frozenset()


@pytest.mark.parametrize(("scenario", "point"), [(s.name, p) for s in SCENARIOS for p in s.points])
def test_every_point_of_the_table_has_a_driver(scenario: str, point: str) -> None:
    assert callable(driver_for(scenario, point))


def test_every_registration_names_a_row_of_the_table() -> None:
    points = {s.name: set(s.points) for s in SCENARIOS}
    for scenario, point in DRIVERS:
        assert scenario in points, f"{scenario!r} is registered but not in the table"
        assert point is None or point in points[scenario], (scenario, point)


def test_point_overrides_pick_their_own_driver() -> None:
    assert driver_for("ambiguous_timeout", "provider_delay_after_commit") is (
        provider.delayed_response
    )
    assert driver_for("ambiguous_timeout", "toxic_latency") is network.response_lost
    assert driver_for("provider_down_during_reconcile", "proxy_disabled") is (
        network.proxy_down_while_reconciling
    )


def test_a_point_override_wins_over_the_scenario_default() -> None:
    registry = DriverRegistry()
    registry.register("row", _noop)
    registry.register("row", _other, points=["special"])
    assert registry.driver_for("row", "special") is _other
    assert registry.driver_for("row", "plain") is _noop


def test_a_duplicate_registration_is_refused() -> None:
    registry = DriverRegistry()
    registry.register("row", _noop)
    with pytest.raises(ValueError, match=r"'row' at every point already has driver _noop"):
        registry.register("row", _other)
    registry.register("row", _noop, points=["p"])
    with pytest.raises(ValueError, match=r"'row' at point 'p' already has driver _noop"):
        registry.register("row", _other, points=["q", "p"])
    assert registry.driver_for("row", "q") is _noop, "a refused registration adds nothing"


def test_an_unplayed_scenario_names_itself_and_its_point() -> None:
    with pytest.raises(NoDriver, match=r"scenario 'nowhere' at point 'p1'"):
        DriverRegistry().driver_for("nowhere", "p1")


def test_a_cell_without_a_driver_is_an_error_not_a_skip() -> None:
    row = Scenario("no_such_row", "nothing", "nothing", "nothing", points=("p1",))
    cell = Cell(row, "p1", "plain", None)

    class Never:
        abort = threading.Event()

        def run_trial(self, *args: Any) -> Any:
            raise AssertionError("no trial may start for a cell without a driver")

    spec = RunSpec(
        cells=[cell],
        seed=1,
        trials=Never(),
        target={},
        skipped={cell.id: "a skip must not hide the missing driver"},
    )
    with pytest.raises(NoDriver, match=r"'no_such_row' at point 'p1'"):
        run_one(spec, cell)
