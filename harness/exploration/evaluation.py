"""What exploring decides about one schedule (:class:`Evaluation`: its first run and any
confirming reruns, :class:`Confirm`'s k of n), and what a whole exploration found
(:class:`Exploration`, :class:`Finding`). Plain records: the search that fills them is
:mod:`harness.exploration.search`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.contract.errors import ConfigError
from harness.contract.vocabulary import Verdict
from harness.schedule import Schedule


@dataclass(frozen=True)
class Outcome:
    """One trial of one schedule: its verdict, the invariants it broke, its record."""

    verdict: str
    invariants: tuple[str, ...] = ()
    #: The trial as results.json keeps it (empty from a fake runner).
    trial: dict[str, Any] = field(default_factory=dict)


#: Runs one trial of a schedule; the label names the trial (``s0007``, ``s0007-r2``).
Runner = Callable[[Schedule, str], Outcome]


@dataclass(frozen=True)
class Confirm:
    """A schedule fails when at least ``k`` of up to ``n`` runs violate."""

    k: int = 2
    n: int = 3

    @classmethod
    def parse(cls, text: str) -> Confirm:
        try:
            k, n = (int(x) for x in text.split("/"))
        except ValueError:
            raise ConfigError(f"--confirm {text!r} must look like k/n, for example 2/3") from None
        if not 1 <= k <= n <= 20:
            raise ConfigError(f"--confirm {text!r}: need 1 <= k <= n <= 20")
        return cls(k, n)

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"


#: What a decided schedule is.
FAILING, FLAKY, HELD, INCONCLUSIVE, NOT_RUN = "failing", "flaky", "held", "inconclusive", "not run"


@dataclass
class Evaluation:
    """A schedule and what its runs said."""

    index: int
    schedule: Schedule
    #: ``generate`` (a fresh example) or ``shrink`` (a candidate smaller than a failure).
    phase: str
    confirm: Confirm
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def violated(self) -> int:
        return sum(o.verdict == Verdict.VIOLATED for o in self.outcomes)

    @property
    def status(self) -> str:
        if not self.outcomes:
            return NOT_RUN
        if self.violated >= self.confirm.k:
            return FAILING
        if self.violated:
            return FLAKY
        if all(o.verdict == Verdict.INCONCLUSIVE for o in self.outcomes):
            return INCONCLUSIVE
        return HELD

    @property
    def rate(self) -> str:
        return f"{self.violated}/{len(self.outcomes)}"

    @property
    def invariants(self) -> list[str]:
        return list(dict.fromkeys(i for o in self.outcomes for i in o.invariants))

    @property
    def kind(self) -> Kind:
        """What sets this failure apart from others: the invariants it broke, sorted."""
        return tuple(sorted(self.invariants))

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "phase": self.phase,
            "status": self.status,
            "reproduced": self.rate,
            "verdicts": [o.verdict for o in self.outcomes],
            "invariants": self.invariants,
            "trials": [o.trial.get("id") for o in self.outcomes if o.trial.get("id")],
            "size": {"faults": len(self.schedule.faults), "jobs": self.schedule.jobs},
            "describe": self.schedule.describe(),
            "schedule": self.schedule.to_json(),
        }


#: A kind of failure: the invariants it broke, sorted.
Kind = tuple[str, ...]


@dataclass(frozen=True)
class Finding:
    """One kind of failure: its smallest failing schedule, and the first one seen."""

    kind: Kind
    #: The smallest failing schedule of this kind (shrunk, when its kind was shrunk).
    evaluation: Evaluation
    #: The first failing schedule of this kind: what the shrinking started from.
    first: Evaluation
    #: Generated examples decided up to this kind's first failure, that one included.
    examples_needed: int | None


@dataclass
class Exploration:
    """What a search found: every schedule decided, one finding per kind of failure (in
    the order each kind was first seen), the flaky ones."""

    mode: str
    evaluations: list[Evaluation]
    #: Generated examples decided before the first failure, that one included.
    examples_needed: int | None
    first_failure: Evaluation | None
    findings: list[Finding] = field(default_factory=list)

    @property
    def finding(self) -> Evaluation | None:
        """The first kind's finding (``finding.json``)."""
        return self.findings[0].evaluation if self.findings else None

    @property
    def flaky(self) -> list[Evaluation]:
        return [e for e in self.evaluations if e.status == FLAKY]

    @property
    def trials_run(self) -> int:
        return sum(len(e.outcomes) for e in self.evaluations)

    @property
    def trials_to_detection(self) -> int | None:
        """Trials run up to and including the first violation, reruns counted."""
        n = 0
        for e in self.evaluations:
            for o in e.outcomes:
                n += 1
                if o.verdict == Verdict.VIOLATED:
                    return n
        return None
