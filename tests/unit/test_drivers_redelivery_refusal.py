"""A refusal decides a redelivery round only when it is the redelivery's own.

Two deliveries of one job run at once in a later round. On a starved machine the
redelivery, started later, can deliver first; the job then ends before the first
delivery's command lands, and that command is refused. Read as the redelivery's refusal,
the round was called exercised ("the queue refused the duplicate") though no delivery
met an attempt in flight (seen under load: held, reached, no failpoint named).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from harness.drivers.redelivery import _Round
from harness.trial import Trial


def _round(*, first_refused: bool, redelivery_refused: bool) -> tuple[_Round, SimpleNamespace]:
    trial = SimpleNamespace(
        rendezvous=object(),
        target=SimpleNamespace(poll_s=None),
        refused=lambda job, since=0.0: first_refused or redelivery_refused,
        reached=False,
        reached_by=None,
        exercised=None,
    )
    played = _Round(cast(Trial, trial), "j-0003")
    # The redelivery's command exited inside the window: after the claim, before the
    # held request was let go.
    played.began, played.window.released = 6.055, 6.305
    played.redelivery = cast(Any, SimpleNamespace(refused=redelivery_refused, exited_at=6.2))
    return played, trial


def test_a_refused_first_delivery_plays_the_round_again() -> None:
    played, trial = _round(first_refused=True, redelivery_refused=False)
    assert played.taken_up() is False
    assert (trial.reached, trial.exercised) == (False, None)


def test_the_redeliverys_own_refusal_in_flight_is_the_queue_protecting_the_job() -> None:
    played, trial = _round(first_refused=False, redelivery_refused=True)
    assert played.taken_up() is True
    assert (trial.reached, trial.reached_by) == (True, None)
    assert "the queue refused the duplicate delivery of j-0003" in trial.exercised


def test_the_redeliverys_refusal_after_the_job_ended_plays_the_round_again() -> None:
    played, trial = _round(first_refused=False, redelivery_refused=True)
    played.redelivery.exited_at = 6.4  # type: ignore[union-attr]  # past the release
    assert played.taken_up() is False
    assert trial.exercised is None
