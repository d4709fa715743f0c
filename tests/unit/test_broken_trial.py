"""Why a trial the harness broke on is inconclusive, and when it prints a traceback."""

from __future__ import annotations

import pytest

from harness.contract.errors import Inconclusive
from harness.trial_run import broken_because


def test_an_unexplained_error_is_a_harness_error_with_its_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    try:
        raise RuntimeError("connection closed")
    except RuntimeError as exc:
        reason = broken_because(exc, lambda: None)
    assert reason == "harness error: RuntimeError: connection closed"
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_an_error_the_infrastructure_explains_prints_no_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A PostgreSQL restart cut the harness's own connection mid-set-up: the verdict names
    # the restart (demoted by the run), and no traceback reads as a bug of the harness.
    try:
        raise RuntimeError("terminating connection due to administrator command")
    except RuntimeError as exc:
        reason = broken_because(exc, lambda: "PostgreSQL restarted mid-trial")
    assert reason.startswith("harness error: RuntimeError: terminating connection")
    assert capsys.readouterr().err == ""


def test_an_inconclusive_trial_is_its_own_reason_and_asks_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def never() -> str | None:
        raise AssertionError("an expected error needs no look at the infrastructure")

    try:
        raise Inconclusive("no worker came up")
    except Inconclusive as exc:
        reason = broken_because(exc, never)
    assert reason == "no worker came up"
    assert capsys.readouterr().err == ""
