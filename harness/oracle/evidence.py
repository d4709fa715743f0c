"""A violation and its evidence: the rows it was decided from and their events."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.contract.records import Arrival, Effect
from harness.oracle.facts import Claim, JobFinal, Record, ResultWrite

LedgerRow = JobFinal | Claim | ResultWrite


@dataclass(frozen=True)
class Violation:
    invariant: str
    job: str | None
    message: str
    #: Rows by kind (``arrivals``, ``effects``, ``ledger``) and ``events``, as results.json
    #: has them.
    evidence: dict[str, Any] = field(default_factory=dict)
    #: Indexes into the sorted event list the oracle was given (the trial's timeline).
    events: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "job": self.job,
            "message": self.message,
            "evidence": self.evidence,
        }


def violation(
    invariant: str,
    job: str | None,
    message: str,
    record: Record,
    *,
    arrivals: Sequence[Arrival] | None = None,
    effects: Sequence[Effect] | None = None,
    ledger: Sequence[LedgerRow] | None = None,
) -> Violation:
    """A violation citing these rows (a kind given, even empty, is shown; one left out
    is not) and the events they were read from."""
    evidence: dict[str, Any] = {}
    if arrivals is not None:
        evidence["arrivals"] = [arrival_row(a) for a in arrivals]
    if effects is not None:
        evidence["effects"] = [effect_row(e) for e in effects]
    if ledger is not None:
        evidence["ledger"] = [asdict(r) for r in ledger]
    events = record.cite([*(arrivals or ()), *(effects or ()), *(ledger or ())])
    evidence["events"] = events
    return Violation(invariant, job, message, evidence, list(events))


#: Fields a report row leaves out: the wall clock, and what the row says otherwise.
_ARRIVAL_HIDDEN = ("t_wall", "peer_pid", "effect_id")


def arrival_row(a: Arrival) -> dict[str, Any]:
    return {k: v for k, v in asdict(a).items() if k not in _ARRIVAL_HIDDEN}


def effect_row(e: Effect) -> dict[str, Any]:
    return {k: v for k, v in asdict(e).items() if k != "t_wall"}
