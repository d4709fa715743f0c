"""A multi-step job and a redelivered job walked through one attempt, scripted answers.

SQLite in a temporary file, no sockets, no sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from scenarios.ledger import Claimed, LedgerStore, open_ledger
from scenarios.worker.attempt import Attempt
from scenarios.worker.calls import Lookup, WriteResult
from scenarios.worker.config import ProviderSpec, WorkerConfig
from scenarios.worker.lease import LeaseKeeper

JOB = "j-0001"
STEPS = (("ticket", "tickets"), ("notify", "mailer"))
OK = WriteResult("ok", "http_201", "7")
CONFIRMED = Lookup("confirmed", "completed", "7")
NOT_FOUND = Lookup("not_found", "http_404")


class NoWait(threading.Event):
    def wait(self, timeout: float | None = None) -> bool:
        return self.is_set()


@dataclass
class Calls:
    writes: list[WriteResult] = field(default_factory=list)
    lookups: list[Lookup] = field(default_factory=list)
    #: (provider url, key) of every write and lookup, in order.
    sent: list[tuple[str, str]] = field(default_factory=list)
    looked: list[tuple[str, str]] = field(default_factory=list)

    def write(
        self,
        spec: ProviderSpec,
        body: Any,
        *,
        key: str,
        marker: str | None,
        token: int,
        identity: str | None = None,
    ) -> WriteResult:
        self.sent.append((spec.url, key))
        return self.writes.pop(0)

    def lookup(
        self,
        spec: ProviderSpec,
        *,
        job_id: str,
        key: str,
        marker: str,
        token: int,
        identity: str | None = None,
    ) -> Lookup:
        self.looked.append((spec.url, key))
        return self.lookups.pop(0)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[LedgerStore]:
    store = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    store.setup()
    store.enqueue(JOB, "tickets", {"job_id": JOB}, now=0.0, steps=STEPS)
    try:
        yield store
    finally:
        store.close()


def attempt(ledger: LedgerStore, calls: Calls, *, mutant: str | None = None, now: float) -> Claimed:
    # "A day from now" plus ``now``: the lease is renewed on the monotonic clock.
    c = ledger.claim("w1", now=time.monotonic() + 86400 + now, ttl_s=86400.0 * 2, max_attempts=None)
    assert c is not None
    cfg = WorkerConfig(
        ledger_dsn="sqlite:///unused",
        worker_id="w1",
        providers={
            "TICKETS": ProviderSpec("idempotent", "http://tickets"),
            "MAILER": ProviderSpec("idempotent", "http://mailer"),
        },
        mutant=mutant,
        lease_ttl_s=3600.0,
    )
    Attempt(
        c,
        cfg=cfg,
        ledger=ledger,
        calls=calls,  # type: ignore[arg-type]
        lease=LeaseKeeper(ledger, c, ttl_s=cfg.lease_ttl_s, check_owner=True),
        stopping=NoWait(),
        bug=lambda name: name == mutant,
        log=lambda *a, **k: None,
    ).run()
    return c


def crash_after_the_ticket(ledger: LedgerStore, *, recorded: bool) -> None:
    """An attempt that sent the ticket and died (having recorded it, or not)."""
    c = ledger.claim("w0", now=0.0, ttl_s=1.0, max_attempts=None)
    assert c is not None
    ledger.mark_submitted(c, key=f"effect-{JOB}-ticket", marker=None, now=0.1)
    if recorded:
        assert ledger.complete_step(c, "ticket", result_ref="7", now=0.2)


def test_each_step_goes_to_its_own_provider_under_its_own_key(ledger: LedgerStore) -> None:
    calls = Calls(writes=[OK, OK])
    attempt(ledger, calls, now=1.0)
    assert calls.sent == [
        ("http://tickets", f"effect-{JOB}-ticket"),
        ("http://mailer", f"effect-{JOB}-notify"),
    ]
    assert ledger.jobs()[0].delivery_state == "acknowledged"


def test_after_an_unrecorded_ticket_the_ticket_is_looked_up_and_only_notify_sent(
    ledger: LedgerStore,
) -> None:
    crash_after_the_ticket(ledger, recorded=False)
    calls = Calls(writes=[OK], lookups=[CONFIRMED])
    attempt(ledger, calls, now=5.0)
    assert calls.looked == [("http://tickets", f"effect-{JOB}-ticket")]
    assert calls.sent == [("http://mailer", f"effect-{JOB}-notify")]


def test_after_a_recorded_ticket_recovery_starts_at_notify(ledger: LedgerStore) -> None:
    crash_after_the_ticket(ledger, recorded=True)
    calls = Calls(writes=[OK])
    attempt(ledger, calls, now=5.0)
    assert (calls.looked, calls.sent) == ([], [("http://mailer", f"effect-{JOB}-notify")])


def test_mutant_restart_from_step_one(ledger: LedgerStore) -> None:
    crash_after_the_ticket(ledger, recorded=True)
    calls = Calls(writes=[OK, OK])
    attempt(ledger, calls, mutant="restart_from_step_one", now=5.0)
    assert [url for url, _ in calls.sent] == ["http://tickets", "http://mailer"]


def test_mutant_step_key_per_attempt(ledger: LedgerStore) -> None:
    crash_after_the_ticket(ledger, recorded=False)
    calls = Calls(writes=[OK, OK], lookups=[NOT_FOUND])
    attempt(ledger, calls, mutant="step_key_per_attempt", now=5.0)
    assert calls.looked == [("http://tickets", f"effect-{JOB}-ticket-a2")]
    assert calls.sent[0] == ("http://tickets", f"effect-{JOB}-ticket-a2")


@pytest.mark.parametrize(("mutant", "writes"), [(None, 0), ("provider_memory_only", 1)])
def test_a_redelivered_done_job_is_closed_from_the_ledger(
    ledger: LedgerStore, mutant: str | None, writes: int
) -> None:
    attempt(ledger, Calls(writes=[OK, OK]), now=1.0)
    assert ledger.redeliver(JOB, now=time.monotonic())
    calls = Calls(writes=[OK, OK])
    attempt(ledger, calls, mutant=mutant, now=3.0)
    # The correct worker trusts its own record; the mutant sends the job's open end (its
    # last step, never recorded apart from the job) again, trusting the provider's memory.
    assert len(calls.sent) == writes
    assert ledger.jobs()[0].delivery_state == "acknowledged"
