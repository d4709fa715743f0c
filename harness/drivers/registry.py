"""Drivers keyed by scenario name, with overrides where one point needs its own.

Registering a scenario (or a point of it) twice is refused when the table is built, and
asking for a scenario no driver plays is an error naming it: a row of the injection table
the engine cannot play must fail loudly, never pass as ``skipped``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from harness.contract.errors import CrashpointError
from harness.trial import Driver


class NoDriver(CrashpointError):
    """A cell's scenario has no driver at its point: the engine cannot play it."""


class DriverRegistry:
    """Which driver plays a scenario: a point-specific one first, else the scenario's."""

    def __init__(self) -> None:
        self._drivers: dict[tuple[str, str | None], Driver] = {}

    def register(self, scenario: str, driver: Driver, *, points: Iterable[str] = ()) -> None:
        """``driver`` plays ``scenario`` at ``points`` (at every point if none are given)."""
        keys: list[tuple[str, str | None]] = [(scenario, p) for p in points]
        keys = keys or [(scenario, None)]
        for key in keys:
            if key in self._drivers:
                where = "at every point" if key[1] is None else f"at point {key[1]!r}"
                raise ValueError(
                    f"scenario {scenario!r} {where} already has driver "
                    f"{self._drivers[key].__name__}; cannot also register {driver.__name__}"
                )
        for key in keys:
            self._drivers[key] = driver

    def driver_for(self, scenario: str, point: str) -> Driver:
        found = self._drivers.get((scenario, point)) or self._drivers.get((scenario, None))
        if found is None:
            raise NoDriver(
                f"no driver plays scenario {scenario!r} at point {point!r}; register one "
                "in harness/drivers/__init__.py"
            )
        return found

    def __iter__(self) -> Iterator[tuple[str, str | None]]:
        """Every registered (scenario, point), point None for a scenario's default."""
        return iter(self._drivers)
