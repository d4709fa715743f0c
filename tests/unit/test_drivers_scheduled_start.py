"""A provider fault at ``start`` is in place before any worker runs.

Armed after the workers started, a fast worker's first write could reach the provider
before the fault did and the schedule would play as if it had none (a replay of a
finding that needs no timing reproduced fewer than five times in five under load).
"""

from __future__ import annotations

from typing import Any, cast

from fake_providers import Fault
from harness.drivers.scheduled import Player
from harness.schedule import FaultStep, Schedule
from harness.trial import Trial


class _Worker:
    name = "w1"

    def alive(self) -> bool:
        return True


class _History:
    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls

    def append(self, source: str, kind: str, **fields: Any) -> None:
        self.calls.append(("note", fields.get("text")))


class _Trial:
    """The trial verbs the player uses at ``start``, each call written down in order."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.workers: dict[str, _Worker] = {}
        self.history = _History(self.calls)
        self.target = object()
        self.reached = False

    def enqueue(self) -> None:
        self.calls.append("enqueue")

    def start_worker(self) -> None:
        self.workers["w1"] = _Worker()
        self.calls.append("start_worker")

    def arm(self, fault: Fault) -> str:
        self.calls.append(("arm", fault.action, fault.times))
        return "f1"


def _play(*faults: FaultStep) -> list[Any]:
    trial = _Trial()
    Player(cast(Trial, trial), Schedule(provider="idempotent", faults=faults)).play()
    return trial.calls


def test_a_failing_write_at_start_is_armed_before_the_first_worker_starts() -> None:
    calls = _play(FaultStep("start", "provider_fault", fault="fail_before_commit", times=3))
    arms = [c for c in calls if isinstance(c, tuple) and c[0] == "arm"]
    assert arms == [("arm", "fail_before_commit", 3)]  # armed once, not again at play
    assert calls.index(arms[0]) < calls.index("start_worker"), calls
    assert ("note", "schedule fault 1: fail_before_commit x3 at start: reached") in calls


def test_a_second_fault_at_start_is_armed_when_the_first_is_done() -> None:
    calls = _play(
        FaultStep("start", "provider_fault", fault="fail_lookup"),
        FaultStep("start", "provider_fault", fault="fail_before_commit", times=2),
    )
    arms = [c for c in calls if isinstance(c, tuple) and c[0] == "arm"]
    assert arms == [("arm", "fail_lookup", 1), ("arm", "fail_before_commit", 2)]
    first_done = calls.index(("note", "schedule fault 1: fail_lookup x1 at start: reached"))
    assert calls.index(arms[1]) > first_done
