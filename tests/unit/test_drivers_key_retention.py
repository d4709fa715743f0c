"""``key_retention`` shortens the provider's memory of keys only once the job completed.

Set from the trial's start, a correct worker whose write got no answer in its own
time-out looked the write up by its key 0.3 s after the commit (a loaded machine), found
nothing, and wrote again: a false alarm on a worker that did everything right.
"""

from __future__ import annotations

from typing import Any, cast

from harness.drivers.steps import key_retention
from harness.plan import cells
from harness.trial import Trial


class _Client:
    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls

    def configure(self, *, key_ttl_s: float | None = None) -> None:
        self.calls.append(("configure", key_ttl_s))


class _Provider:
    def __init__(self, kind: str, calls: list[Any]) -> None:
        self.kind = kind
        self.client = _Client(calls)


class _History:
    def append(self, source: str, kind: str, **fields: Any) -> None:
        pass


class _Rendezvous:
    def hits(self) -> list[Any]:
        return []


class _Target:
    poll_s = None


class _Config:
    lease_ttl_s = 0.3


class _Trial:
    """The verbs the driver uses, each call written down in order."""

    def __init__(self, cell: Any) -> None:
        self.cell = cell
        self.calls: list[Any] = []
        self.providers = {
            "billing": _Provider("idempotent", self.calls),
            "mailer": _Provider("plain", self.calls),
        }
        self.history = _History()
        self.rendezvous = _Rendezvous()
        self.target = _Target()
        self.config = _Config()

    def enqueue_batch(self) -> str:
        self.calls.append("enqueue")
        return "j-0001"

    def start_worker(self) -> None:
        self.calls.append("start_worker")

    def wait_quiescent(self) -> bool:
        self.calls.append("quiescent")
        return True

    def sleep(self, s: float) -> None:
        self.calls.append(("sleep", s))

    def redeliver(self, job: str) -> bool:
        self.calls.append("redeliver")
        return True

    def refused(self, job: str, *, since: float) -> bool:
        return True  # the queue drops it: the driver stops here


def test_keys_are_forgotten_only_after_the_job_completed() -> None:
    cell = next(c for c in cells() if c.scenario.name == "key_retention")
    trial = _Trial(cell)
    key_retention(cast(Trial, trial))
    assert trial.calls[:5] == [
        "enqueue",
        "start_worker",
        "quiescent",
        ("configure", 0.3),  # the idempotent provider only
        ("sleep", 0.3 * 1.5),
    ]
    assert trial.calls[5] == "redeliver"
