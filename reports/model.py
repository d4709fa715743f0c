"""The results model: frozen dataclasses mirroring ``results.json`` (docs/results.md).

Renderers read only these classes, never the harness's internals, so a report can be
rebuilt from any stored ``results.json`` (or from several shards merged).
Parsing lives in ``reports.parse``; writing back in ``reports.json_io``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.contract.vocabulary import VERDICT_ORDER, Verdict

#: What a matrix cell shows: a verdict, or ``not_reached`` for a trial whose injection
#: was never confirmed at its boundary (docs/results.md, ``reached``).
CellStatus = Literal["held", "violated", "not_reached", "inconclusive", "skipped"]

#: The status of a reached trial is its verdict.
_STATUS_OF: Mapping[Verdict, CellStatus] = {
    Verdict.HELD: "held",
    Verdict.VIOLATED: "violated",
    Verdict.INCONCLUSIVE: "inconclusive",
    Verdict.SKIPPED: "skipped",
}

#: Worst first: the verdicts' one order (``harness.contract.vocabulary.VERDICT_ORDER``),
#: with a trial never reached just below inconclusive (unproven, though it ran).
CELL_STATUSES: tuple[CellStatus, ...] = tuple(
    status
    for verdict in VERDICT_ORDER
    for status in (
        ("inconclusive", "not_reached")
        if verdict is Verdict.INCONCLUSIVE
        else (_STATUS_OF[verdict],)
    )
)

#: A cell holding several trials (repeated seeds) shows the worst one: a single
#: violation outweighs any number of held trials, and an unproven cell (inconclusive,
#: not reached, skipped) must never look as good as a held one.
SEVERITY: Mapping[CellStatus, int] = {
    status: len(CELL_STATUSES) - 1 - rank for rank, status in enumerate(CELL_STATUSES)
}


@dataclass(frozen=True)
class TimelineEvent:
    """One event of a trial history; ``index`` is its position in ``trial.events``."""

    index: int
    t: float
    source: str
    kind: str
    job: str | None = None
    attempt: int | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)

    @property
    def outcome(self) -> str | None:
        value = self.fields.get("outcome")
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Evidence:
    """What the oracle saw: provider arrivals and effects, ledger rows, event indexes."""

    arrivals: tuple[Mapping[str, Any], ...] = ()
    effects: tuple[Mapping[str, Any], ...] = ()
    ledger: tuple[Mapping[str, Any], ...] = ()
    events: tuple[int, ...] = ()
    #: Keys the oracle added beyond the four documented ones, kept for round trips.
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ViolationRow:
    invariant: str
    job: str | None
    message: str = ""
    evidence: Evidence = field(default_factory=Evidence)


@dataclass(frozen=True)
class TrialRow:
    id: str
    scenario: str
    injection_point: str
    provider: str
    signal: str | None
    backend: str
    ledger: str
    mutant: str | None
    verdict: Verdict
    reached: bool
    duration_s: float
    replay: str
    reason: str | None = None
    violations: tuple[ViolationRow, ...] = ()
    #: Findings that broke no invariant; ``invariant`` holds the warning's name.
    warnings: tuple[ViolationRow, ...] = ()
    seed: int | None = None
    description: str | None = None
    expected: str | None = None
    events: tuple[TimelineEvent, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)
    #: Set only in merged results, where two shards hold different trials with one id.
    run_id: str | None = None
    #: Keys added by newer writers; kept so a round trip loses nothing.
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def provider_label(self) -> str:
        """The provider as the user declared it (``billing (idempotent)``), else its kind."""
        name = self.extra.get("provider_name")
        persona = self.extra.get("persona")
        kind = f"{persona} over {self.provider}" if isinstance(persona, str) else self.provider
        return f"{name} ({kind})" if isinstance(name, str) else kind

    @property
    def reached_by(self) -> str | None:
        """How the injection was confirmed: "failpoint" (exactly) or "provider" (a hold)."""
        how = self.extra.get("reached_by")
        return how if isinstance(how, str) else None

    @property
    def exercised(self) -> str | None:
        """What the cell exercised, in one sentence (where its kill landed, a duplicate
        the queue refused); None in documents written before it was recorded."""
        said = self.extra.get("exercised")
        return said if isinstance(said, str) else None

    @property
    def containment(self) -> str | None:
        """How the workers' trees were contained (``cgroup2``, ``process_group``,
        ``container``); None in documents written before it was recorded."""
        how = self.extra.get("containment")
        return how if isinstance(how, str) else None

    @property
    def escalations(self) -> tuple[str, ...]:
        """What each ``escalate`` event says: a worker outlived SIGTERM for its grace,
        so SIGKILL was sent."""
        return tuple(
            str(e.fields.get("text") or f"{e.fields.get('worker', 'a worker')} got SIGKILL")
            for e in self.events
            if e.kind == "escalate"
        )

    @property
    def unjudged(self) -> dict[str, str]:
        """Invariants the trial could not judge, with the reason for each."""
        found = self.extra.get("unjudged")
        if not isinstance(found, dict):
            return {}
        return {str(k): str(v) for k, v in found.items()}

    @property
    def key(self) -> str:
        """Unique within one ``Results``: the id, qualified by run id after a merge clash."""
        return self.id if self.run_id is None else f"{self.id}@{self.run_id}"

    @property
    def status(self) -> CellStatus:
        """What the coverage matrix shows for this trial.

        A violation is reported even when the injection was not confirmed: the oracle
        found it in provider truth, and hiding it as "not reached" would let it pass.
        """
        if not self.reached and self.verdict in (Verdict.HELD, Verdict.INCONCLUSIVE):
            return "not_reached"
        return _STATUS_OF[self.verdict]

    @property
    def name(self) -> str:
        """The id without its scenario (JUnit ``name`` beside ``classname``).

        A cell's id is ``[mutant.]scenario.point.provider.signal.ledger.backend``
        (``harness.plan.Cell.id``): a mutant's trial keeps its mutant in front.
        """
        lead = f"{self.mutant}." if self.mutant else ""
        prefix = f"{lead}{self.scenario}."
        return lead + self.id[len(prefix) :] if self.id.startswith(prefix) else self.id


@dataclass(frozen=True)
class Target:
    name: str
    kind: str
    mutant: str | None = None
    #: Keys beyond the three above (``providers``, ``config``, ``config_line``), kept for
    #: round trips and read by the reports that need them (sarif.json's fallback location).
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Summary:
    total: int = 0
    held: int = 0
    violated: int = 0
    inconclusive: int = 0
    skipped: int = 0
    not_reached: int = 0
    #: Warnings of all trials together (a trial may give several).
    warnings: int = 0

    @classmethod
    def of(cls, trials: tuple[TrialRow, ...] | list[TrialRow]) -> Summary:
        counts = dict.fromkeys(Verdict, 0)
        for trial in trials:
            counts[trial.verdict] += 1
        return cls(
            total=len(trials),
            held=counts[Verdict.HELD],
            violated=counts[Verdict.VIOLATED],
            inconclusive=counts[Verdict.INCONCLUSIVE],
            skipped=counts[Verdict.SKIPPED],
            not_reached=sum(1 for t in trials if t.status == "not_reached"),
            warnings=sum(len(t.warnings) for t in trials),
        )


@dataclass(frozen=True)
class MutantResult:
    name: str
    description: str
    expected_invariant: str | None
    killed: bool
    by: tuple[str, ...] = ()
    invariants: tuple[str, ...] = ()

    @property
    def caught_as_expected(self) -> bool:
        return self.killed and self.expected_invariant in self.invariants


@dataclass(frozen=True)
class KillMatrix:
    mutants: tuple[MutantResult, ...]
    correct_trials: int | None = None
    correct_violations: int | None = None
    #: "until_killed": each mutant stopped once caught; "full": every cell ran; None: unsaid.
    mode: str | None = None

    @property
    def killed(self) -> int:
        return sum(1 for m in self.mutants if m.killed)


@dataclass(frozen=True)
class Results:
    run_id: str
    seed: int | None
    target: Target
    trials: tuple[TrialRow, ...]
    environment: Mapping[str, str | None] = field(default_factory=dict)
    command: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    kill_matrix: KillMatrix | None = None
    #: Run ids of the shards a merged result came from (empty for a single run).
    merged_from: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> Summary:
        """Always recomputed from the trials, so it cannot disagree with them."""
        return Summary.of(self.trials)

    @property
    def status_counts(self) -> dict[CellStatus, int]:
        """Trials per matrix status (``held`` here excludes held trials not reached)."""
        counts: dict[CellStatus, int] = dict.fromkeys(CELL_STATUSES, 0)
        for trial in self.trials:
            counts[trial.status] += 1
        return counts

    def trial(self, key: str) -> TrialRow:
        for trial in self.trials:
            if trial.key == key:
                return trial
        raise KeyError(key)
