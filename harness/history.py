"""The trial history: every event of one trial in one ordered log.

Supervisor, rendezvous, backends and network append to it as things happen;
:mod:`harness.observe` brings in what providers, the ledger and worker logs recorded.
The oracle and the report only read it. Times are ``time.monotonic()`` seconds: on Linux
that clock is shared by every process on the machine, so events from providers and
workers order correctly against the supervisor's own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from harness.contract.vocabulary import EventKind

#: Every kind an event may have; a typo in an engine module fails at once, not in a report.
_KINDS = frozenset(EventKind)


@dataclass(frozen=True)
class Event:
    """One thing that happened during a trial."""

    t: float
    source: str
    kind: str
    job: str | None = None
    attempt: int | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(
                f"event kind {self.kind!r} is not in harness.contract.vocabulary.EventKind; "
                "add it there (and its colour group in reports/timeline.py)"
            )

    def to_json(self, *, t0: float = 0.0) -> dict[str, Any]:
        return {
            "t": round(self.t - t0, 6),
            "source": self.source,
            "kind": self.kind,
            "job": self.job,
            "attempt": self.attempt,
            "fields": self.fields,
        }


#: Where an event keeps the record it was made from (see :func:`made_from`).
MADE_FROM = "_made_from"


def made_from(event: Event, record: object) -> Event:
    """``event``, remembering that ``record`` (a frozen provider record) is what its
    fields were copied from, so the oracle takes it as it is instead of reading it
    back field by field (:class:`harness.oracle.loading.Loader`).

    Not a field: the event's value, equality and JSON stay its fields', an event read
    back from results.json has none, and ``dataclasses.replace`` (a new event, fields
    changed or not) leaves it behind. Events are not edited in place.
    """
    object.__setattr__(event, MADE_FROM, record)
    return event


def record_of(event: Event) -> object | None:
    """The record ``event`` was made from (:func:`made_from`), or None."""
    return event.__dict__.get(MADE_FROM)


class History:
    """A thread-safe event log for one trial: appended to, never trimmed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[Event] = []
        self.t0 = time.monotonic()

    def append(
        self,
        source: str,
        kind: str,
        *,
        job: str | None = None,
        attempt: int | None = None,
        t: float | None = None,
        **fields: Any,
    ) -> Event:
        event = Event(
            t=time.monotonic() if t is None else t,
            source=source,
            kind=kind,
            job=job,
            attempt=attempt,
            fields=fields,
        )
        with self._lock:
            self._events.append(event)
        return event

    def extend(self, events: Iterable[Event]) -> None:
        with self._lock:
            self._events.extend(events)

    def replace(self, old: Event, new: Event) -> None:
        """Put ``new`` where ``old`` (this very event) was.

        Only for a record that its source keeps updating: a provider finishes an arrival
        row when its request ends, and the arrival's one event follows it.
        """
        with self._lock:
            for i, e in enumerate(self._events):
                if e is old:
                    self._events[i] = new
                    return
        raise ValueError(f"replace: {old!r} is not in this history")

    def events(self) -> list[Event]:
        """All events ordered by time (stable for equal times)."""
        with self._lock:
            return sorted(self._events, key=lambda e: e.t)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events())

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)

    def of_kind(self, kind: str) -> list[Event]:
        return [e for e in self.events() if e.kind == kind]

    def to_json(self) -> list[dict[str, Any]]:
        return [e.to_json(t0=self.t0) for e in self.events()]
