"""One attempt walked through the protocol against scripted provider answers.

SQLite in a temporary file, no sockets, no sleeping: backoff waits return at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from scenarios.ledger import Claimed, JobRow, LedgerStore, open_ledger
from scenarios.worker.attempt import Attempt
from scenarios.worker.calls import Lookup, WriteResult
from scenarios.worker.config import ProviderSpec, WorkerConfig
from scenarios.worker.lease import LeaseKeeper

JOB = "j-0001"
BODY = {"job_id": JOB, "amount": 5}


class NoWait(threading.Event):
    """Backoff without the wait: unit tests never sleep."""

    def wait(self, timeout: float | None = None) -> bool:
        return self.is_set()


@dataclass
class ScriptedCalls:
    writes: list[WriteResult] = field(default_factory=list)
    lookups: list[Lookup] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    looked: list[dict[str, Any]] = field(default_factory=list)
    ledger: LedgerStore | None = None
    states_at_write: list[JobRow] = field(default_factory=list)

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
        sent = {"body": dict(body), "key": key, "marker": marker, "token": token}
        self.sent.append(sent if identity is None else {**sent, "identity": identity})
        if self.ledger is not None:
            self.states_at_write.append(self.ledger.jobs()[0])
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
        looked = {"key": key, "marker": marker}
        self.looked.append(looked if identity is None else {**looked, "identity": identity})
        return self.lookups.pop(0)


OK = WriteResult("ok", "http_201", "99")
TIMEOUT = WriteResult("unknown", "no_response:ReadTimeout")
IN_FLIGHT = WriteResult("unknown", "http_409")
FAILED = WriteResult("failed", "http_503")
MISMATCH = WriteResult("conflict", "http_422")
CONFIRMED = Lookup("confirmed", "completed", "99")
NOT_FOUND = Lookup("not_found", "http_404")
DOWN = Lookup("unavailable", "http_503")


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[LedgerStore]:
    store = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    store.setup()
    store.enqueue(JOB, "billing", BODY, now=0.0)
    try:
        yield store
    finally:
        store.close()


def run(
    ledger: LedgerStore,
    calls: ScriptedCalls,
    *,
    mutant: str | None = None,
    kind: str = "idempotent",
    max_attempts: int = 3,
    claim: Claimed | None = None,
) -> Claimed:
    # Claim "a day from now": every backoff is due by then, and no sleep is needed.
    c = claim or ledger.claim(
        "w1",
        now=_now() + 86400,
        ttl_s=86400.0 * 2,
        max_attempts=None if mutant == "uncapped_retries" else max_attempts,
    )
    assert c is not None
    make_attempt(ledger, calls, c, mutant=mutant, kind=kind, max_attempts=max_attempts).run()
    return c


def make_attempt(
    ledger: LedgerStore,
    calls: ScriptedCalls,
    c: Claimed,
    *,
    mutant: str | None = None,
    kind: str = "idempotent",
    max_attempts: int = 3,
) -> Attempt:
    cfg = WorkerConfig(
        ledger_dsn="sqlite:///unused",
        worker_id="w1",
        providers={"BILLING": ProviderSpec(kind, "http://provider.test")},
        mutant=mutant,
        max_attempts=max_attempts,
        lease_ttl_s=3600.0,
    )
    check_owner = mutant != "renew_without_owner_check"
    return Attempt(
        c,
        cfg=cfg,
        ledger=ledger,
        calls=calls,  # type: ignore[arg-type]
        lease=LeaseKeeper(ledger, c, ttl_s=cfg.lease_ttl_s, check_owner=check_owner),
        stopping=NoWait(),
        bug=lambda name: name == mutant,
        log=lambda *a, **k: None,
    )


def _now() -> float:
    return time.monotonic()


def job(ledger: LedgerStore) -> JobRow:
    return ledger.jobs()[0]


def states(ledger: LedgerStore) -> tuple[str, str, str, bool]:
    j = job(ledger)
    return (j.delivery_state, j.execution_state, j.side_effect_state, j.needs_review)


# -- the correct worker -----------------------------------------------------------------


def test_success_persists_the_key_first_and_acknowledges(ledger: LedgerStore) -> None:
    calls = ScriptedCalls(writes=[OK], ledger=ledger)
    c = run(ledger, calls)
    [sent] = calls.sent
    assert sent == {"body": BODY, "key": f"effect-{JOB}", "marker": None, "token": c.token}
    [before] = calls.states_at_write
    assert (before.side_effect_state, before.idempotency_key) == ("submitted", f"effect-{JOB}")
    assert states(ledger) == ("acknowledged", "succeeded", "confirmed", False)
    assert job(ledger).result_ref == "99"


def test_plain_provider_gets_a_stable_marker(ledger: LedgerStore) -> None:
    calls = ScriptedCalls(writes=[OK])
    run(ledger, calls, kind="plain")
    assert calls.sent[0]["marker"] == f"cm-{JOB}"


def test_timeout_is_unknown_and_reconciled_before_anything_else(ledger: LedgerStore) -> None:
    calls = ScriptedCalls(writes=[TIMEOUT], lookups=[CONFIRMED])
    run(ledger, calls)
    assert len(calls.sent) == 1
    assert calls.looked == [{"key": f"effect-{JOB}", "marker": f"cm-{JOB}"}]
    assert states(ledger) == ("acknowledged", "succeeded", "confirmed", False)
    assert [w.outcome for w in ledger.result_writes()] == ["unknown", "succeeded"]


def test_not_found_after_unknown_retries_later_under_the_same_key(ledger: LedgerStore) -> None:
    calls = ScriptedCalls(writes=[TIMEOUT, OK], lookups=[NOT_FOUND])
    run(ledger, calls)
    assert states(ledger) == ("queued", "failed", "not_attempted", False)
    run(ledger, calls)
    assert [s["key"] for s in calls.sent] == [f"effect-{JOB}"] * 2
    assert [s["body"] for s in calls.sent] == [BODY, BODY]
    assert states(ledger) == ("acknowledged", "succeeded", "confirmed", False)


def test_409_in_flight_waits_for_the_provider_instead_of_failing(ledger: LedgerStore) -> None:
    in_flight = Lookup("unavailable", "in_flight")
    calls = ScriptedCalls(writes=[IN_FLIGHT], lookups=[in_flight, DOWN, CONFIRMED])
    run(ledger, calls)
    assert len(calls.sent) == 1
    assert [r.outcome for r in ledger.reconciles()] == ["unavailable", "unavailable", "confirmed"]
    assert states(ledger)[0] == "acknowledged"


@pytest.mark.parametrize(
    "answer", [Lookup("unqueryable", "http_501"), Lookup("conflict", "2_matches")]
)
def test_irreconcilable_unknown_goes_to_review(ledger: LedgerStore, answer: Lookup) -> None:
    calls = ScriptedCalls(writes=[TIMEOUT], lookups=[answer])
    run(ledger, calls, kind="plain")
    assert states(ledger) == ("queued", "unknown", "ambiguous", True)
    assert ledger.claim("w2", now=_now() + 10**6, ttl_s=1, max_attempts=3) is None


def test_payload_mismatch_goes_to_review(ledger: LedgerStore) -> None:
    run(ledger, ScriptedCalls(writes=[MISMATCH]))
    assert states(ledger)[3]


def test_clean_failures_back_off_and_dead_letter_at_the_cap(ledger: LedgerStore) -> None:
    calls = ScriptedCalls(writes=[FAILED, FAILED])
    run(ledger, calls, max_attempts=2)
    assert states(ledger) == ("queued", "failed", "not_attempted", False)
    run(ledger, calls, max_attempts=2)
    assert states(ledger) == ("dead_lettered", "failed", "not_attempted", False)
    assert calls.looked == [], "a clean 5xx needs no reconcile"


def test_reclaimed_submitted_job_is_reconciled_before_any_write(ledger: LedgerStore) -> None:
    first = ledger.claim("w0", now=0.0, ttl_s=1.0, max_attempts=3)
    assert first is not None
    ledger.mark_submitted(first, key=f"effect-{JOB}", marker=None, now=0.1)
    calls = ScriptedCalls(lookups=[CONFIRMED])
    run(ledger, calls)
    assert calls.sent == [], "the effect exists: no second write"
    assert states(ledger)[0] == "acknowledged"


def test_lost_lease_means_no_call(ledger: LedgerStore) -> None:
    c = ledger.claim("w1", now=0.0, ttl_s=1.0, max_attempts=3)
    assert c is not None
    assert ledger.claim("w2", now=2.0, ttl_s=1.0, max_attempts=3) is not None
    calls = ScriptedCalls(writes=[OK])
    run(ledger, calls, claim=c)
    assert calls.sent == []


# -- each mutant departs at its one place -----------------------------------------------


def test_mutant_fresh_key_per_attempt(ledger: LedgerStore) -> None:
    calls = ScriptedCalls(writes=[OK])
    run(ledger, calls, mutant="fresh_key_per_attempt")
    assert calls.sent[0]["key"] == f"effect-{JOB}-a1"


def test_mutant_key_persisted_after_call(ledger: LedgerStore) -> None:
    calls = ScriptedCalls(writes=[OK], ledger=ledger)
    run(ledger, calls, mutant="key_persisted_after_call")
    assert calls.states_at_write[0].side_effect_state == "not_attempted"


def test_mutant_timeout_is_failure(ledger: LedgerStore) -> None:
    calls = ScriptedCalls(writes=[TIMEOUT])
    run(ledger, calls, mutant="timeout_is_failure")
    assert calls.looked == []
    assert states(ledger) == ("queued", "failed", "not_attempted", False)


def stale_attempt(ledger: LedgerStore, mutant: str | None) -> Attempt:
    """An attempt whose lease another worker has since claimed (token 2)."""
    c = ledger.claim("w1", now=0.0, ttl_s=1.0, max_attempts=3)
    assert c is not None
    assert ledger.claim("w2", now=2.0, ttl_s=1.0, max_attempts=3) is not None
    return make_attempt(ledger, ScriptedCalls(), c, mutant=mutant)


@pytest.mark.parametrize("mutant", [None, "no_cas_on_result"])
def test_mutant_no_cas_on_result(ledger: LedgerStore, mutant: str | None) -> None:
    stale_attempt(ledger, mutant).result("succeeded", result_ref="1")
    assert [(w.token, w.accepted) for w in ledger.result_writes()] == [(1, mutant is not None)]


@pytest.mark.parametrize("mutant", [None, "renew_without_owner_check"])
def test_mutant_renew_without_owner_check(ledger: LedgerStore, mutant: str | None) -> None:
    assert stale_attempt(ledger, mutant).lease_held() is (mutant is not None)
    assert job(ledger).token == (1 if mutant else 2), "the mutant takes the lease back"


@pytest.mark.parametrize("mutant", [None, "lease_checked_only_at_claim"])
def test_mutant_lease_checked_only_at_claim(ledger: LedgerStore, mutant: str | None) -> None:
    c = ledger.claim("w1", now=_now(), ttl_s=3600.0, max_attempts=3)
    assert c is not None
    calls = ScriptedCalls(writes=[OK])
    attempt = make_attempt(ledger, calls, c, mutant=mutant)
    attempt.lease.lost.set()  # the renewal thread found the lease gone
    attempt.run()
    assert len(calls.sent) == (1 if mutant else 0)


def test_mutant_skip_reconcile_after_restart(ledger: LedgerStore) -> None:
    first = ledger.claim("w0", now=0.0, ttl_s=1.0, max_attempts=3)
    assert first is not None
    ledger.mark_submitted(first, key=f"effect-{JOB}", marker="cm", now=0.1)
    calls = ScriptedCalls(writes=[OK])
    run(ledger, calls, mutant="skip_reconcile_after_restart", kind="plain")
    assert calls.looked == []
    assert len(calls.sent) == 1


def test_mutant_lookup_error_is_not_found(ledger: LedgerStore) -> None:
    calls = ScriptedCalls(writes=[TIMEOUT], lookups=[DOWN])
    run(ledger, calls, mutant="lookup_error_is_not_found")
    assert [r.outcome for r in ledger.reconciles()] == ["not_found"]
    assert states(ledger)[0] == "queued", "requeued for a blind retry"


def test_mutant_conflict_409_new_key(ledger: LedgerStore) -> None:
    calls = ScriptedCalls(writes=[IN_FLIGHT, OK])
    run(ledger, calls, mutant="conflict_409_new_key")
    run(ledger, calls, mutant="conflict_409_new_key")
    assert calls.looked == []
    assert [s["key"] for s in calls.sent] == [f"effect-{JOB}", f"effect-{JOB}-r2"]


def test_mutant_timestamp_in_payload(ledger: LedgerStore) -> None:
    calls = ScriptedCalls(writes=[OK])
    run(ledger, calls, mutant="timestamp_in_payload")
    assert set(calls.sent[0]["body"]) == {*BODY, "requested_at"}


def test_mutant_uncapped_retries(ledger: LedgerStore) -> None:
    calls = ScriptedCalls(writes=[FAILED] * 3)
    for _ in range(3):
        run(ledger, calls, mutant="uncapped_retries", max_attempts=2)
    assert states(ledger)[0] == "queued", "still retrying past the cap"
    assert job(ledger).attempts == 3


def test_mutant_ack_before_effect(ledger: LedgerStore) -> None:
    calls = ScriptedCalls(writes=[OK], ledger=ledger)
    run(ledger, calls, mutant="ack_before_effect")
    assert calls.states_at_write[0].delivery_state == "acknowledged"


# -- identity-bound jobs ----------------------------------------------------------------

BOUND = "j-0002"
EXPIRED = Lookup("unverified", "http_401")
CHANGED = Lookup("unverified", "http_403", identity_now="acct-other")


def _reclaimed_bound_job(ledger: LedgerStore) -> None:
    """A job bound to acct-1 whose first owner persisted its key and died."""
    for row in ledger.jobs():  # the fixture's unbound job is done first, out of the way
        assert row.job_id == JOB
    run(ledger, ScriptedCalls(writes=[OK]))
    ledger.enqueue(BOUND, "billing", {"job_id": BOUND, "identity": "acct-1"}, now=0.0)
    first = ledger.claim("w0", now=0.0, ttl_s=1.0, max_attempts=3)
    assert first is not None
    assert first.job_id == BOUND
    ledger.mark_submitted(first, key=f"effect-{BOUND}", marker=None, now=0.1)


def _bound_row(ledger: LedgerStore) -> JobRow:
    return next(j for j in ledger.jobs() if j.job_id == BOUND)


def test_every_call_of_a_bound_job_names_its_identity(ledger: LedgerStore) -> None:
    _reclaimed_bound_job(ledger)
    calls = ScriptedCalls(writes=[OK], lookups=[NOT_FOUND])
    run(ledger, calls)
    assert [x["identity"] for x in calls.looked + calls.sent] == ["acct-1", "acct-1"]


@pytest.mark.parametrize("refusal", [EXPIRED, CHANGED], ids=["expired", "changed"])
def test_a_refused_identity_on_recovery_blocks_the_job(
    ledger: LedgerStore, refusal: Lookup
) -> None:
    _reclaimed_bound_job(ledger)
    calls = ScriptedCalls(writes=[OK], lookups=[refusal])
    run(ledger, calls)
    assert calls.sent == [], "nothing is done under an unverified identity"
    row = _bound_row(ledger)
    assert row.needs_review
    assert "blocked" in (row.review_reason or "")


def test_a_refused_write_blocks_the_job_too(ledger: LedgerStore) -> None:
    run(ledger, ScriptedCalls(writes=[OK]))
    ledger.enqueue(BOUND, "billing", {"job_id": BOUND, "identity": "acct-1"}, now=0.0)
    calls = ScriptedCalls(writes=[WriteResult("unverified", "http_401")])
    run(ledger, calls)
    assert len(calls.sent) == 1
    assert _bound_row(ledger).needs_review


def test_mutant_identity_retry_anyway(ledger: LedgerStore) -> None:
    _reclaimed_bound_job(ledger)
    calls = ScriptedCalls(writes=[OK], lookups=[CHANGED])
    run(ledger, calls, mutant="identity_retry_anyway")
    # Logged in again as whoever the profile holds now, and acted as them.
    assert [x["identity"] for x in calls.sent] == ["acct-other"]
    assert not _bound_row(ledger).needs_review
