"""The observer: what providers, the ledger and worker logs recorded, as history events.

Each provider arrival becomes one ``arrival`` (a write) or ``reconcile`` (a lookup) event
carrying the whole arrival; each committed effect one ``commit`` event carrying the
effect; each held request let go one ``release`` event (how, by whom, when); each
ledger row the event the target adapter makes of it; each worker JSON log line worth a
mark one event in that worker's lane. Every one is appended exactly once,
with the time it happened (the history sorts by time), however often :meth:`drain` runs.

A provider keeps updating an arrival row until its request ends (a commit sets 201
before a drop clears it; a delayed answer marks its fault late). :meth:`drain` pages
new arrivals only; :meth:`settle`, the trial's last drain, reads them all once more and
brings each arrival's event to its final state.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from harness.contract.records import Arrival, Effect
from harness.history import Event, History, made_from

#: Worker log events worth a mark on the timeline (the rest is there already: claims and
#: results from the ledger, writes and lookups from the provider).
LOG_KINDS = {
    "lease_lost": "lease_expired",
    "attempt_abandoned": "note",
    "ledger_error": "note",
    "recovery": "note",
    "no_provider": "note",
}


class ProviderLog(Protocol):
    """A provider's oracle API (:class:`fake_providers.ProviderClient`)."""

    def arrivals(self, *, after: int = 0) -> list[Arrival]: ...

    def effects(self) -> list[Effect]: ...

    def releases(self) -> list[dict[str, Any]]: ...


class LedgerLog(Protocol):
    """A target whose ledger rows become events (:class:`harness.targets.base.TargetAdapter`)."""

    def ledger_events(self) -> list[Event]: ...


class Observer:
    """Brings one trial's outside records into its history, each once."""

    def __init__(self, history: History) -> None:
        self.history = history
        self._lock = threading.Lock()
        #: Every provider watched, with the last arrival id read from it.
        self._providers: list[tuple[ProviderLog, list[int]]] = []
        self._ledger: LedgerLog | None = None
        self._logs: dict[str, tuple[Path, int]] = {}
        #: Arrivals and effects by (provider name, id): ids are each provider's own.
        self._arrivals: dict[tuple[str, int], tuple[Arrival, Event]] = {}
        self._effects: set[tuple[str, int]] = set()
        self._releases: set[tuple[str, int]] = set()
        self._ledger_rows: set[tuple[Any, ...]] = set()

    def watch_provider(self, provider: ProviderLog) -> None:
        """Read this provider too (a trial watches every provider its workers call)."""
        self._providers.append((provider, [0]))

    def watch_ledger(self, ledger: LedgerLog) -> None:
        self._ledger = ledger

    def follow_log(self, worker: str, path: Path) -> None:
        """Read ``worker``'s JSON log lines from ``path`` (stderr) from now on."""
        with self._lock:
            self._logs.setdefault(worker, (path, 0))

    def drain(self) -> None:
        """Append whatever was recorded since the last drain."""
        with self._lock:
            for provider, last in self._providers:
                self._arrivals_since(provider, last, last[0])
                self._new_effects(provider)
                self._new_releases(provider)
            self._new_ledger_rows()
            for worker in list(self._logs):
                self._new_log_lines(worker)

    def settle(self) -> None:
        """The last drain: everything new, and every arrival in its final state."""
        self.drain()
        with self._lock:
            for provider, last in self._providers:
                self._arrivals_since(provider, last, 0)

    # -- one source each ----------------------------------------------------------------

    def _arrivals_since(self, provider: ProviderLog, last: list[int], after: int) -> None:
        for a in provider.arrivals(after=after):
            last[0] = max(last[0], a.id)
            seen = self._arrivals.get((a.provider, a.id))
            event = arrival_event(a)
            if seen is None:
                self.history.extend([event])
            elif seen[0] != a:
                self.history.replace(seen[1], event)
            else:
                continue
            self._arrivals[(a.provider, a.id)] = (a, event)

    def _new_effects(self, provider: ProviderLog) -> None:
        fresh = [e for e in provider.effects() if (e.provider, e.id) not in self._effects]
        self._effects.update((e.provider, e.id) for e in fresh)
        self.history.extend(commit_event(e) for e in fresh)

    def _new_releases(self, provider: ProviderLog) -> None:
        fresh = [r for r in provider.releases() if (r["provider"], r["id"]) not in self._releases]
        self._releases.update((r["provider"], r["id"]) for r in fresh)
        self.history.extend(release_event(r) for r in fresh)

    def _new_ledger_rows(self) -> None:
        if self._ledger is None:
            return
        for event in self._ledger.ledger_events():
            key = _identity(event)
            if key not in self._ledger_rows:
                self._ledger_rows.add(key)
                self.history.extend([event])

    def _new_log_lines(self, worker: str) -> None:
        path, offset = self._logs[worker]
        try:
            with path.open("rb") as f:
                f.seek(offset)
                data = f.read()
        except OSError:
            return  # not written yet (a container's logs are copied out at its exit)
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next drain
        self._logs[worker] = (path, offset + end)
        self.history.extend(log_events(data[:end].decode(errors="replace"), worker))


#: Arrival kind -> event kind; a lookup (and anything else) is a reconcile. A model's
#: plan is its own kind: it neither commits nor looks the job up.
_ARRIVAL_KINDS = {"write": "arrival", "control_denied": "control_denied", "plan": "plan"}


def arrival_event(a: Arrival) -> Event:
    """The event of one arrival: every Arrival field, plus the names the report reads."""
    if a.kind == "lookup":
        outcome = "ok" if a.status == 200 else ("unknown" if a.status == 404 else "error")
    elif a.kind == "plan":
        outcome = "ok" if a.status == 200 else ("error" if a.status else "unknown")
    else:
        outcome = "ok" if a.committed or a.replayed else ("error" if a.status else "unknown")
    fields = a.to_json()
    fields.update(
        outcome=outcome,
        key=a.idempotency_key or a.client_marker,
        worker=a.worker_id,
        token=a.fencing_token,
        arrival=a.id,
    )
    event = Event(
        t=a.t_mono,
        source=f"provider:{a.provider}",
        kind=_ARRIVAL_KINDS.get(a.kind, "reconcile"),
        job=a.job_id,
        fields=fields,
    )
    return made_from(event, a)


def commit_event(e: Effect) -> Event:
    """The event of one committed effect: every Effect field, tied to its arrival."""
    fields = e.to_json()
    fields.update(outcome="ok", arrival=e.arrival_id)
    event = Event(
        t=e.t_mono, source=f"provider:{e.provider}", kind="commit", job=e.job_id, fields=fields
    )
    return made_from(event, e)


def release_event(r: dict[str, Any]) -> Event:
    """The event of one held request let go: how (``outcome``), by whom (``released_by``:
    the harness's call, the hold's own deadline, the hold limit, a reset) and when."""
    fields = {k: v for k, v in r.items() if k not in ("id", "t_mono", "job_id")}
    fields.update(arrival=r["arrival_id"], release=r["id"])
    return Event(
        t=float(r["t_mono"]),
        source=f"provider:{r['provider']}",
        kind="release",
        job=r["job_id"],
        fields=fields,
    )


def log_events(text: str, worker: str) -> Iterator[Event]:
    """Events from a worker's JSON log lines (``{"t": monotonic, "event": ...}``) on
    stderr; anything else a worker prints is left alone."""
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("event") not in LOG_KINDS:
            continue
        t = entry.get("t")
        if not isinstance(t, int | float):
            continue
        fields = {k: v for k, v in entry.items() if k not in ("t", "worker", "job", "attempt")}
        fields["outcome"] = "rejected" if entry["event"] == "lease_lost" else "unknown"
        job = entry.get("job")
        yield Event(
            float(t),
            f"worker:{worker}",
            LOG_KINDS[str(entry["event"])],
            job=str(job) if job is not None else None,
            fields=fields,
        )


def _identity(event: Event) -> tuple[Any, ...]:
    """A ledger row's identity: audit rows are never rewritten, so their value is it."""
    fields = json.dumps(event.fields, sort_keys=True, default=str)
    return (event.t, event.source, event.kind, event.job, event.attempt, fields)
