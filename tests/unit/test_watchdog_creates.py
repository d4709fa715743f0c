"""A container create the harness died during is waited for by the watchdog and removed
when it lands, not left "created" for good after the sweep by label."""

from __future__ import annotations

from typing import Any

import pytest

from harness.watchdog import _Registry, _remove_containers


class _Container:
    def __init__(self, name: str, removed: list[str]) -> None:
        self.name = name
        self._removed = removed

    def remove(self, **_: Any) -> None:
        self._removed.append(self.name)


class _Engine:
    """Lists, at its n-th listing, the containers that have landed by then."""

    def __init__(self, lands: dict[str, int]) -> None:
        self.lands = lands
        self.listings = 0
        self.removed: list[str] = []
        self.containers = self
        self.volumes = self

    def list(self, **kw: Any) -> list[_Container]:
        if "all" not in kw:
            return []  # the volumes
        self.listings += 1
        return [
            _Container(n, self.removed)
            for n, at in self.lands.items()
            if at <= self.listings and n not in self.removed
        ]

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("harness.watchdog.time.sleep", lambda s: None)


def test_a_create_that_lands_after_the_sweep_is_removed_when_it_lands() -> None:
    engine = _Engine({"cp-run-w1-0": 1, "cp-run-w2-0": 3})
    _remove_containers("run", {"cp-run-w2-0"}, connect=lambda: engine, land_within_s=60)
    assert engine.removed == ["cp-run-w1-0", "cp-run-w2-0"]
    assert engine.listings == 3, "looked again until the awaited create landed, not longer"


def test_with_no_create_in_flight_one_sweep_is_all() -> None:
    engine = _Engine({"cp-run-w1-0": 1})
    _remove_containers("run", (), connect=lambda: engine, land_within_s=60)
    assert (engine.removed, engine.listings) == (["cp-run-w1-0"], 1)


def test_a_create_that_never_lands_is_waited_for_only_so_long() -> None:
    engine = _Engine({})
    _remove_containers("run", {"cp-run-w1-0"}, connect=lambda: engine, land_within_s=0)
    assert (engine.removed, engine.listings) == ([], 1)


def test_the_registry_keeps_creates_until_settled() -> None:
    registry = _Registry("run1")
    registry.apply({"op": "creating", "name": "a"})
    registry.apply({"op": "creating", "name": "b"})
    registry.apply({"op": "created", "name": "a"})
    assert registry.creating == {"b"}
    assert not registry.containers, "a create in flight is awaited even before any watch"
