"""The observer: provider, ledger and log records become history events, each once."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from fake_providers.models import Arrival, Effect
from harness.history import Event, History
from harness.observe import Observer, arrival_event
from harness.oracle.facts import read


def arrival(i: int, **kw: Any) -> Arrival:
    base: dict[str, Any] = {
        "id": i,
        "t_mono": float(i),
        "t_wall": 0.0,
        "provider": "svc",
        "kind": "write",
        "method": "POST",
        "path": "/v1/effects",
        "job_id": "j-1",
        "idempotency_key": "k",
        "client_marker": None,
        "fingerprint": "f",
        "fencing_token": "1",
        "worker_id": "w1",
        "peer_pid": 42,
        "status": 201,
        "committed": False,
        "replayed": False,
        "effect_id": None,
        "fault": None,
    }
    base.update(kw)
    return Arrival(**base)


class Provider:
    """A provider's oracle API over lists the test edits."""

    def __init__(self) -> None:
        self.rows: list[Arrival] = []
        self.commits: list[Effect] = []
        self.lets_go: list[dict[str, Any]] = []
        self.pages: list[int] = []

    def arrivals(self, *, after: int = 0) -> list[Arrival]:
        self.pages.append(after)
        return [a for a in self.rows if a.id > after]

    def effects(self) -> list[Effect]:
        return list(self.commits)

    def releases(self) -> list[dict[str, Any]]:
        return list(self.lets_go)


class Ledger:
    def __init__(self) -> None:
        self.rows: list[Event] = []

    def ledger_events(self) -> list[Event]:
        # A fresh copy every time, as a read of the ledger makes.
        return [dataclasses.replace(e, fields=dict(e.fields)) for e in self.rows]


def observer() -> tuple[Observer, History, Provider, Ledger]:
    history = History()
    obs = Observer(history)
    provider, ledger = Provider(), Ledger()
    obs.watch_provider(provider)
    obs.watch_ledger(ledger)
    return obs, history, provider, ledger


def test_each_record_is_appended_once_however_often_it_drains() -> None:
    obs, history, provider, ledger = observer()
    provider.rows.append(arrival(1))
    ledger.rows.append(Event(0.5, "worker:w1", "claim", "j-1", 1, {"token": 1, "worker": "w1"}))
    obs.drain()
    provider.rows.append(arrival(2, kind="lookup", method="GET", status=200))
    provider.commits.append(Effect(7, "svc", "j-1", "k", None, "f", 1, t_mono=1.5, t_wall=0.0))
    obs.drain()
    obs.settle()
    kinds = [(e.kind, e.t) for e in history.events()]
    assert kinds == [("claim", 0.5), ("arrival", 1.0), ("commit", 1.5), ("reconcile", 2.0)]
    assert provider.pages[:2] == [0, 1], "a drain pages the arrivals after the last one seen"


def test_arrival_events_carry_the_whole_arrival_and_the_report_names() -> None:
    a = arrival(3, committed=True, idempotency_key=None, client_marker="m")
    fields = arrival_event(a).fields
    assert {k: fields[k] for k in a.to_json()} == a.to_json()
    assert (fields["outcome"], fields["key"], fields["worker"], fields["token"]) == (
        "ok",
        "m",
        "w1",
        "1",
    )
    assert fields["arrival"] == 3
    assert read([arrival_event(a)]).arrivals == (a,)


def test_settle_brings_an_open_arrival_to_its_final_state_in_place() -> None:
    obs, history, provider, _ = observer()
    provider.rows.append(arrival(1, status=201, committed=True))  # committed, answer pending
    obs.drain()
    provider.rows[0] = arrival(1, status=None, committed=True, fault="drop_after_commit")
    obs.drain()
    assert history.events()[0].fields["status"] == 201, "a drain pages new arrivals only"
    obs.settle()
    [event] = history.events()
    assert (event.fields["status"], event.fields["fault"]) == (None, "drop_after_commit")


def test_log_lines_are_read_once_and_a_partial_line_waits(tmp_path: Path) -> None:
    obs, history, _, _ = observer()
    log = tmp_path / "w1.stderr.log"
    lost = json.dumps({"t": 1.0, "event": "lease_lost", "job": "j-1", "worker": "w1"})
    log.write_text(f"starting\n{lost}\n")
    obs.follow_log("w1", log)
    obs.drain()
    recovery = json.dumps({"t": 2.0, "event": "recovery"})
    with log.open("a") as f:
        f.write(recovery[:10])
    obs.drain()
    with log.open("a") as f:
        f.write(recovery[10:] + "\n")
    obs.drain()
    obs.settle()
    events = [(e.source, e.kind, e.job, e.fields["outcome"]) for e in history.events()]
    assert events == [
        ("worker:w1", "lease_expired", "j-1", "rejected"),
        ("worker:w1", "note", None, "unknown"),
    ]


def test_a_log_not_written_yet_is_read_later(tmp_path: Path) -> None:
    obs, history, _, _ = observer()
    log = tmp_path / "w2.stderr.log"
    obs.follow_log("w2", log)
    obs.drain()
    log.write_text(json.dumps({"t": 3.0, "event": "no_provider"}) + "\n")
    obs.settle()
    assert [e.kind for e in history.events()] == ["note"]


def test_a_denied_control_call_is_its_own_event_and_no_write_or_lookup() -> None:
    # A worker that reached for /_control without the run's secret: the provider refused
    # it (403) and recorded the attempt; the history shows it, the oracle ignores it.
    obs, history, provider, _ = observer()
    provider.rows.append(
        arrival(
            1,
            kind="control_denied",
            method="POST",
            path="/_control/reset",
            job_id=None,
            idempotency_key=None,
            fingerprint=None,
            status=403,
        )
    )
    obs.drain()
    (event,) = history.events()
    assert (event.kind, event.source, event.fields["path"]) == (
        "control_denied",
        "provider:svc",
        "/_control/reset",
    )
    record = read(history.events())
    assert record.arrivals == ()
