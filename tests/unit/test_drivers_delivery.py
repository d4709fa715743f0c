"""Redeliveries meet the first attempt in flight, and only a fair while: a duplicate counts as
met once the provider answered it, and a held first attempt is let go within half a lease."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from harness.drivers.delivery import _second_write_answered
from harness.drivers.redelivery import RELEASE_WITHIN_LEASES, _first_attempt_held
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


def test_a_redelivery_round_holds_the_first_attempt_half_a_lease_at_most() -> None:
    # Even when the claim is read late: the provider lets the request go by itself.
    trial = cast(Trial, SimpleNamespace(config=SimpleNamespace(lease_ttl_s=0.5)))
    fault = _first_attempt_held(trial, "j-1")
    assert (fault.action, fault.job) == ("hold_before_commit", "j-1")
    assert fault.release_after_s == 0.5 * RELEASE_WITHIN_LEASES
    assert fault.release_outcome == "commit"
