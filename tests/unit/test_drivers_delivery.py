"""A second consumer's duplicate counts as met in flight only once the provider answered it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from harness.drivers.delivery import _second_write_answered
from harness.trial import Trial


def _trial(*arrivals: tuple[str, str, int | None]) -> Trial:
    rows = [SimpleNamespace(kind=k, job_id=j, status=s) for k, j, s in arrivals]
    return cast(Trial, SimpleNamespace(client=SimpleNamespace(arrivals=lambda: rows)))


def test_a_second_write_recorded_but_not_yet_decided_is_not_met() -> None:
    # Releasing here could let the first commit before the second's key is read.
    trial = _trial(("write", "j-1", None), ("write", "j-1", None))
    assert not _second_write_answered(trial, "j-1")


def test_a_second_write_answered_in_flight_is_met() -> None:
    trial = _trial(("write", "j-1", None), ("write", "j-1", 409))
    assert _second_write_answered(trial, "j-1")


def test_lookups_and_other_jobs_do_not_count_as_the_second_write() -> None:
    trial = _trial(
        ("write", "j-1", None), ("lookup", "j-1", 404), ("write", "j-2", 200), ("write", "j-1", 200)
    )
    assert _second_write_answered(trial, "j-1")
    assert not _second_write_answered(
        _trial(*[("write", "j-1", None), ("lookup", "j-1", 404)]), "j-1"
    )
