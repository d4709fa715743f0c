"""A kill at ``after_external_call`` lands on the batch's next job when the first ended
without passing it (a correct worker whose call timed out looks its write up instead):
the driver arms its hold to move on, and what it decides afterwards is about the job the
kill met, not the one it first aimed at."""

from __future__ import annotations

from typing import Any, cast

from harness.drivers.process import crash_at_failpoint
from harness.plan import cells
from harness.trial import Trial


class _Hit:
    job = "j-0002"  # the job the moved hold met


class _Trial:
    def __init__(self, cell: Any) -> None:
        self.cell = cell
        self.holds: list[tuple[str, str | None, bool]] = []

    def enqueue_batch(self) -> str:
        return "j-0001"

    def hold(self, point: str, *, job: str | None = None, or_next: bool = False) -> object:
        self.holds.append((point, job, or_next))
        return object()

    def start_worker(self) -> object:
        return object()

    def wait_hit(self, gate: object, *, what: str) -> _Hit:
        return _Hit()

    def crash(self, worker: object, signal: str, *, hit: _Hit) -> bool:
        return True


def test_the_kill_and_the_review_follow_the_job_the_hold_met() -> None:
    cell = next(
        c
        for c in cells()
        if c.scenario.name == "crash_after_external_success" and c.provider == "unqueryable"
    )
    trial = _Trial(cell)
    review = crash_at_failpoint(cast(Trial, trial))
    assert trial.holds == [("after_external_call", "j-0001", True)]
    # Unqueryable: the unknown write can end only in review, and it is j-0002's.
    assert review == frozenset({"j-0002"})
