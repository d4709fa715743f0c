"""What the oracle knows: the trial's facts, and the history read back into records.

The history holds everything that happened (arrivals, commits, claims, result writes);
:class:`TrialFacts` holds what is not an event: the jobs, each provider's kind, the
jobs' end states as the target reports them (its ledger, or its ``status`` command) and
the limits the target declared. :func:`read` turns the
events back into the records the invariants compare, remembering each record's event
index so a violation can point at the events it was decided from.
"""

from __future__ import annotations

import bisect
import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from harness.contract.records import Arrival, Effect
from harness.contract.vocabulary import EventKind
from harness.history import MADE_FROM, Event
from harness.oracle.loading import Loader

_arrival = Loader(Arrival)
_effect = Loader(Effect)


#: Delivery states that end a job's journey (needs_review ends it too).
END_DELIVERY_STATES = frozenset({"acknowledged", "dead_lettered"})


@dataclass(frozen=True)
class JobFinal:
    """A job's durable state at the end of a trial, as the target reports it."""

    job_id: str
    delivery_state: str
    execution_state: str
    side_effect_state: str
    needs_review: bool
    #: Attempts the target counted; None when it does not say.
    attempts: int | None
    #: The provider's record id the target kept for the job's effect (its ledger's
    #: result reference, or ``external_ref`` of its status line); None: it kept none.
    external_ref: str | None = None
    #: The last error the target recorded for the job, and why it sent the job to review.
    last_error: str | None = None
    review_reason: str | None = None
    #: The idempotency key the target recorded for the job; None: it reports none.
    idempotency_key: str | None = None

    @property
    def final(self) -> bool:
        """The job has ended: acknowledged, dead-lettered or in needs_review."""
        return self.needs_review or self.delivery_state in END_DELIVERY_STATES


@dataclass(frozen=True)
class TrialFacts:
    """What the oracle needs besides the history."""

    jobs: Sequence[str]
    provider_kinds: Mapping[str, str]
    #: Every job's state at the end, from the target's ledger or its status command;
    #: None when the target cannot tell (what that leaves unjudged: :func:`unjudged`).
    job_states: Sequence[JobFinal] | None = None
    #: The most writes per job the target declares; None: it declares none, and only
    #: that retries stop is checked.
    max_attempts: int | None = None
    quiescent: bool = True
    #: Jobs whose only safe end is needs_review (an unprotectable cell, see DESIGN "Fairness").
    review_expected: frozenset[str] = frozenset()
    #: The provider each job was routed to (its duty: one effect there). A job may also
    #: call other providers in the same flow; each of those is held to one effect per job
    #: by no_duplicate_effect. Absent: every provider's effects count as the job's.
    job_providers: Mapping[str, str] = field(default_factory=dict)
    #: When the trial's bound ran out before quiescence: the monotonic time its last quiet
    #: window began. A job still written to after it had retries that did not stop.
    last_window_from: float | None = None
    #: A multi-step job's ordered steps, ``(step, provider)``, each at its own provider;
    #: a job not named here is a single-step job.
    job_steps: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    #: The stand-in values the harness put into the fields the target marks sensitive
    #: (``[target] sensitive_fields``), each to its field's name; key hygiene looks for them.
    sensitive_values: Mapping[str, str] = field(default_factory=dict)
    #: The least time the target declares between a refused write of a job and its next
    #: write (``[target] min_backoff_s``); None: it declares none, and the intervals are
    #: reported, never judged (harness.oracle.backoff).
    min_backoff_s: float | None = None


@dataclass(frozen=True)
class Claim:
    job_id: str
    token: int
    worker_id: str
    t_mono: float


@dataclass(frozen=True)
class ResultWrite:
    job_id: str
    token: int
    worker_id: str
    accepted: bool
    t_mono: float


@dataclass(frozen=True)
class Record:
    """The records the invariants compare, read back out of one sorted event list."""

    arrivals: tuple[Arrival, ...] = ()
    effects: tuple[Effect, ...] = ()
    #: The ledger's claims and result writes as plain rows, in the order of the fields of
    #: :class:`Claim` and :class:`ResultWrite`: a long history has one of each per attempt,
    #: and the invariants read their values; the records are made when first asked for.
    claim_rows: tuple[tuple[str, int, str, float], ...] = ()
    result_write_rows: tuple[tuple[str, int, str, bool, float], ...] = ()
    #: Job -> the highest token it was claimed under.
    top_token: Mapping[str, int] = field(default_factory=dict)
    #: The index of the event each record above was read from, position for position.
    arrivals_at: tuple[int, ...] = ()
    effects_at: tuple[int, ...] = ()
    claims_at: tuple[int, ...] = ()
    result_writes_at: tuple[int, ...] = ()
    #: (provider, arrival id) -> other events about that arrival (a provider's hold).
    related: Mapping[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)
    #: Signals sent to workers: the moments of the crashes that led to any violation.
    signals: tuple[int, ...] = ()
    #: (provider, tool path) -> the annotations an MCP provider's tool declares, and
    #: the index of the event that recorded them (see :data:`TOOLS_EVENT`).
    tools: Mapping[tuple[str, str], Mapping[str, bool]] = field(default_factory=dict)
    tools_index: Mapping[str, int] = field(default_factory=dict)
    #: Worker -> the consumer it works for, for the workers of a second consumer (a job
    #: delivered twice, each consumer with a ledger of its own), from the supervisor's
    #: note that names a worker and its consumer.
    #: Their tokens are from their own ledger and their retries count against their own
    #: cap; a worker not named here works for the trial's target (consumer 1).
    consumer_of: Mapping[str, int] = field(default_factory=dict)
    #: The indexes of the supervisor's ledger restores: a restore puts the target's state
    #: back to before its jobs ran, so what a worker counted before it is forgotten.
    restores_at: tuple[int, ...] = ()
    #: (job, token) -> the attempt its claim names: the attempt a write under that token
    #: belongs to (the trace's rows).
    claim_attempts: Mapping[tuple[str, int], int] = field(default_factory=dict)
    #: Job -> (time, attempt) of every event not from a provider that names an attempt
    #: of the job, in history order: the trace's attempt of a write no claim explains.
    named_attempts: Mapping[str, tuple[tuple[float, int], ...]] = field(default_factory=dict)
    #: Job -> (time, event index) of the first acknowledged cancel of the job.
    cancels: Mapping[str, tuple[float, int]] = field(default_factory=dict)

    def consumer(self, worker_id: str | None) -> int:
        """The consumer a write's worker works for (1: the trial's target)."""
        return self.consumer_of.get(worker_id or "", 1)

    def restores_before(self, rec: object) -> int:
        """How many ledger restores came before the event ``rec`` was read from."""
        if not self.restores_at:
            return 0
        return bisect.bisect_right(self.restores_at, self.index[rec])

    @functools.cached_property
    def claims(self) -> tuple[Claim, ...]:
        return tuple(Claim(*row) for row in self.claim_rows)

    @functools.cached_property
    def result_writes(self) -> tuple[ResultWrite, ...]:
        return tuple(ResultWrite(*row) for row in self.result_write_rows)

    @functools.cached_property
    def retried(self) -> list[tuple[tuple[str, str], list[Arrival]]]:
        """The (provider, job)s of :attr:`writes` written more than once, with their
        writes: a job written once can be no retry, and most jobs of a long history are
        (gathered without a list per job, or a sort of every job)."""
        first: dict[tuple[str, str], Arrival] = {}
        more: dict[tuple[str, str], list[Arrival]] = {}
        for a in self.arrivals:
            if a.kind == "write" and a.job_id is not None:
                key = (a.provider, a.job_id)
                if key in first:
                    more.setdefault(key, [first[key]]).append(a)
                else:
                    first[key] = a
        for writes in more.values():
            writes.sort(key=lambda a: a.t_mono)
        return sorted(more.items())

    # The two indexes below are built when first asked for (citing a violation, the
    # trace): hashing every record of a clean 100,000-arrival history for them cost a
    # tenth of the oracle's time.
    @functools.cached_property
    def index(self) -> Mapping[object, int]:
        """The index of the event each record was read from (records are unique values)."""
        out: dict[object, int] = {}
        out.update(zip(self.arrivals, self.arrivals_at, strict=True))
        out.update(zip(self.effects, self.effects_at, strict=True))
        out.update(zip(self.claims, self.claims_at, strict=True))
        out.update(zip(self.result_writes, self.result_writes_at, strict=True))
        return out

    @functools.cached_property
    def arrival_index(self) -> Mapping[tuple[str, int], int]:
        """(provider, arrival id) -> the index of its arrival event (ids are per provider)."""
        return {(a.provider, a.id): i for a, i in zip(self.arrivals, self.arrivals_at, strict=True)}

    @functools.cached_property
    def writes(self) -> list[tuple[tuple[str, str], list[Arrival]]]:
        """Every (provider, job)'s writes in time order, sorted by provider and job (the
        invariants that need only retries read :attr:`retried`)."""
        return sorted(writes_by_job(self.arrivals).items())

    #: The identity each job is bound to (its body's ``identity``, from its enqueue
    #: event); jobs that name none are absent.
    job_identities: Mapping[str, str] = field(default_factory=dict)

    def cite(self, facts: Iterable[object]) -> list[int]:
        """Indexes of the events behind ``facts``, with what concerns their arrivals and
        every signal sent."""
        out = set(self.signals)
        for fact in facts:
            if fact in self.index:
                out.add(self.index[fact])
            arrival = None
            if isinstance(fact, Arrival):
                arrival = (fact.provider, fact.id)
            elif isinstance(fact, Effect):
                arrival = (fact.provider, fact.arrival_id)
            if arrival is not None:
                out.update(self.related.get(arrival, ()))
                if arrival in self.arrival_index:
                    out.add(self.arrival_index[arrival])
        return sorted(out)


#: The event a trial starts with for each MCP provider: the tools it declares.
TOOLS_EVENT = EventKind.TOOLS


#: How the source of a provider's event begins.
PROVIDER_SOURCE = "provider:"


def is_provider_event(event: Event) -> bool:
    return event.source.startswith(PROVIDER_SOURCE)


def read(events: Sequence[Event]) -> Record:
    """The arrivals, effects, claims and result writes that ``events`` record."""
    arrivals: list[Arrival] = []
    arrivals_at: list[int] = []
    effects: list[Effect] = []
    effects_at: list[int] = []
    claims: list[tuple[str, int, str, float]] = []
    claims_at: list[int] = []
    top: dict[str, int] = {}
    writes: list[tuple[str, int, str, bool, float]] = []
    writes_at: list[int] = []
    related: dict[tuple[str, int], list[int]] = defaultdict(list)
    signals: list[int] = []
    tools: dict[tuple[str, str], Mapping[str, bool]] = {}
    tools_index: dict[str, int] = {}
    identities: dict[str, str] = {}
    consumer_of: dict[str, int] = {}
    restores: list[int] = []
    claim_attempts: dict[tuple[str, int], int] = {}
    named: dict[str, list[tuple[float, int]]] = defaultdict(list)
    cancels: dict[str, tuple[float, int]] = {}
    # The four kinds a long history is made of come first, with their helpers' fast
    # paths written out: this loop runs once per event, 400,000 times for 100,000 jobs.
    for i, e in enumerate(events):
        kind = e.kind
        if (kind == "arrival" or kind == "reconcile") and e.source.startswith(PROVIDER_SOURCE):
            made = e.__dict__.get(MADE_FROM)
            arrivals.append(made if type(made) is Arrival else _arrival(e, i))
            arrivals_at.append(i)
        elif kind == "commit" and e.source.startswith(PROVIDER_SOURCE):
            made = e.__dict__.get(MADE_FROM)
            effects.append(made if type(made) is Effect else _effect(e, i))
            effects_at.append(i)
        elif kind == "claim" or kind == "result_write":
            job, f = e.job, e.fields
            if job is None:
                raise ValueError(f"event #{i} ({kind} from {e.source}) names no job")
            worker = f.get("worker")
            worker = str(worker) if worker is not None else e.source.removeprefix("worker:")
            lease = f["token"]
            if type(lease) is not int:
                lease = int(lease)
            if kind == "claim":
                claims.append((job, lease, worker, e.t))
                claims_at.append(i)
                if e.attempt is not None:
                    claim_attempts[(job, lease)] = e.attempt
                if lease > top.get(job, lease - 1):
                    top[job] = lease
            else:
                writes.append((job, lease, worker, bool(f["accepted"]), e.t))
                writes_at.append(i)
        elif kind == "signal":
            signals.append(i)
        elif isinstance(e.fields.get("arrival"), int) and is_provider_event(e):
            related[(e.source.removeprefix(PROVIDER_SOURCE), e.fields["arrival"])].append(i)
        elif kind == TOOLS_EVENT and is_provider_event(e):
            provider = e.source.removeprefix("provider:")
            tools_index[provider] = i
            for tool in e.fields.get("tools", ()):
                tools[(provider, str(tool["path"]))] = dict(tool.get("annotations", {}))
        elif kind == "enqueue" and e.job is not None and isinstance(e.fields.get("identity"), str):
            identities.setdefault(e.job, e.fields["identity"])
        elif kind == "note" and e.source == "supervisor" and _consumer_note(e):
            consumer_of[str(e.fields["worker"])] = int(e.fields["consumer"])
        elif kind == "restore" and e.source == "supervisor":
            restores.append(i)
        elif kind == "cancel" and e.source == "supervisor" and e.job is not None:
            cancels.setdefault(e.job, (e.t, i))
        attempt = e.attempt
        if attempt is not None and e.job is not None and not e.source.startswith(PROVIDER_SOURCE):
            named[e.job].append((e.t, attempt))
    return Record(
        arrivals=tuple(arrivals),
        effects=tuple(effects),
        claim_rows=tuple(claims),
        result_write_rows=tuple(writes),
        top_token=top,
        arrivals_at=tuple(arrivals_at),
        effects_at=tuple(effects_at),
        claims_at=tuple(claims_at),
        result_writes_at=tuple(writes_at),
        related={k: tuple(v) for k, v in related.items()},
        signals=tuple(signals),
        tools=tools,
        tools_index=tools_index,
        job_identities=identities,
        consumer_of=consumer_of,
        restores_at=tuple(restores),
        claim_attempts=claim_attempts,
        named_attempts={job: tuple(seen) for job, seen in named.items()},
        cancels=cancels,
    )


def _consumer_note(e: Event) -> bool:
    return isinstance(e.fields.get("consumer"), int) and isinstance(e.fields.get("worker"), str)


# -- readings the invariants share ------------------------------------------------------


def writes_by_job(arrivals: Iterable[Arrival]) -> dict[tuple[str, str], list[Arrival]]:
    out: dict[tuple[str, str], list[Arrival]] = defaultdict(list)
    for a in arrivals:
        if a.kind == "write" and a.job_id is not None:
            out[(a.provider, a.job_id)].append(a)
    for writes in out.values():
        if len(writes) > 1:
            writes.sort(key=lambda a: a.t_mono)
    return out


def settled(write: Arrival) -> bool:
    """The provider answered with an error and committed nothing: the outcome is known."""
    return (not write.committed) and write.status is not None and write.status >= 400


def token(a: Arrival) -> int | None:
    if a.fencing_token is None:
        return None
    try:
        return int(a.fencing_token)
    except ValueError:
        return None


def identity(a: Arrival) -> str | None:
    """The name a worker gives a logical job at this provider: its key or its marker."""
    return a.idempotency_key if a.idempotency_key is not None else a.client_marker
