"""The schedule player arms a held request's own deadline at the provider."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from harness.drivers.scheduled import RELEASE_WITHIN_LEASES, Player
from harness.schedule import FaultStep, Schedule
from harness.trial import Trial


def _player(redelivery: str = "same_queue") -> Player:
    trial = SimpleNamespace(
        config=SimpleNamespace(lease_ttl_s=4.0), target=SimpleNamespace(redelivery=redelivery)
    )
    return Player(cast(Trial, trial), cast(Schedule, None))


def test_a_request_held_before_commit_is_dropped_by_the_provider_at_half_a_lease() -> None:
    deadline = _player()._deadline(FaultStep(at="arrival", action="kill"))
    assert deadline == {"release_after_s": 4.0 * RELEASE_WITHIN_LEASES, "release_outcome": "drop"}


def test_a_hold_after_commit_makes_no_ghost_and_has_no_deadline() -> None:
    assert _player()._deadline(FaultStep(at="commit", action="kill")) == {}
    assert _player()._deadline(FaultStep(at="response", action="pause", duration_s=1.0)) == {}


def test_a_second_consumers_duplicate_waits_past_half_a_lease() -> None:
    step = FaultStep(at="arrival", action="duplicate")
    assert _player("second_consumer")._deadline(step) == {}
    assert _player()._deadline(step) != {}
