"""Ledger state transitions, the same suite on SQLite (unit tier) and PostgreSQL (process tier).

Time is passed in as ``now``, so lease expiry is driven without sleeping.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scenarios.ledger import Claimed, JobRow, LedgerError, LedgerStore, open_ledger

TTL = 1.0


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=[pytest.mark.process, pytest.mark.postgres]),
    ]
)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    if request.param == "sqlite":
        s = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        s = open_ledger(dsn, schema=request.getfixturevalue("pg_schema"))
    s.setup()
    s.setup()  # idempotent: every worker runs it
    try:
        yield s
    finally:
        s.close()


def claim(store: LedgerStore, worker: str, now: float, cap: int | None = 3) -> Claimed | None:
    return store.claim(worker, now=now, ttl_s=TTL, max_attempts=cap)


def job(store: LedgerStore, job_id: str = "j-0001") -> JobRow:
    return next(j for j in store.jobs() if j.job_id == job_id)


def test_enqueue_collapses_duplicate_deliveries(store: LedgerStore) -> None:
    assert store.enqueue("j-0001", "billing", {"job_id": "j-0001"}, now=0.0)
    assert not store.enqueue("j-0001", "billing", {"job_id": "j-0001", "x": 1}, now=0.0)
    j = job(store)
    assert (j.delivery_state, j.execution_state, j.side_effect_state) == (
        "queued",
        "not_started",
        "not_attempted",
    )
    assert (j.attempts, j.token, j.needs_review) == (0, 0, False)


def test_claim_leases_once_and_audits(store: LedgerStore) -> None:
    store.enqueue("j-0001", "billing", {"job_id": "j-0001", "n": 1}, now=0.0)
    c = claim(store, "w1", now=10.0)
    assert c is not None
    assert (c.attempt, c.token, c.body, c.lease_expires_at) == (
        1,
        1,
        {"job_id": "j-0001", "n": 1},
        11.0,
    )
    assert claim(store, "w2", now=10.5) is None, "a live lease must not be claimed twice"
    j = job(store)
    assert (j.delivery_state, j.execution_state, j.owner) == ("leased", "running", "w1")
    [row] = store.claims()
    assert (row.job_id, row.attempt, row.token, row.worker_id, row.t_mono) == (
        "j-0001",
        1,
        1,
        "w1",
        10.0,
    )
    assert row.lease_expires_at == 11.0


def test_expired_lease_is_reclaimed_with_a_new_token(store: LedgerStore) -> None:
    store.enqueue("j-0001", "billing", {"job_id": "j-0001"}, now=0.0)
    c1 = claim(store, "w1", now=10.0)
    assert c1 is not None
    c2 = claim(store, "w2", now=11.01)
    assert c2 is not None
    assert (c2.attempt, c2.token, c2.worker_id) == (2, 2, "w2")
    assert [(r.worker_id, r.token) for r in store.claims()] == [("w1", 1), ("w2", 2)]


def test_renew_only_while_owner_and_token_match(store: LedgerStore) -> None:
    store.enqueue("j-0001", "billing", {"job_id": "j-0001"}, now=0.0)
    c1 = claim(store, "w1", now=10.0)
    assert c1 is not None
    assert store.renew(c1, now=10.5, ttl_s=TTL) == 11.5
    assert claim(store, "w2", now=11.2) is None, "renewed lease is still live"
    assert store.renew(c1, now=12.0, ttl_s=TTL) is None, "an expired lease is lost for good"
    c2 = claim(store, "w2", now=12.0)
    assert c2 is not None
    assert store.renew(c1, now=12.1, ttl_s=TTL) is None, "stale token"
    assert store.renew(c2, now=12.1, ttl_s=TTL) == 13.1


def test_renew_without_owner_check_steals_the_lease_back(store: LedgerStore) -> None:
    # What the renew_without_owner_check mutant does: the stale owner's renewal wins.
    store.enqueue("j-0001", "billing", {"job_id": "j-0001"}, now=0.0)
    c1 = claim(store, "w1", now=10.0)
    c2 = claim(store, "w2", now=11.5)
    assert c1 is not None
    assert c2 is not None
    assert store.renew(c1, now=11.6, ttl_s=TTL, check_owner=False) == 12.6
    assert (job(store).owner, job(store).token) == ("w1", 1)
    assert store.renew(c2, now=11.7, ttl_s=TTL) is None


def test_cas_rejects_a_stale_token_and_audits_it(store: LedgerStore) -> None:
    store.enqueue("j-0001", "billing", {"job_id": "j-0001"}, now=0.0)
    c1 = claim(store, "w1", now=10.0)
    assert c1 is not None
    assert store.mark_submitted(c1, key="effect-j-0001", marker=None, now=10.1)
    c2 = claim(store, "w2", now=11.5)
    assert c2 is not None
    assert c2.side_effect_state == "submitted", "the reclaimer must see the earlier call"
    assert not store.mark_submitted(c1, key="effect-j-0001", marker=None, now=11.6)
    assert not store.write_result(c1, "succeeded", now=11.6, result_ref="1")
    assert store.write_result(c2, "succeeded", now=11.7, result_ref="1")
    writes = [(w.token, w.worker_id, w.accepted, w.outcome) for w in store.result_writes()]
    assert writes == [(1, "w1", False, "succeeded"), (2, "w2", True, "succeeded")]
    j = job(store)
    assert (j.delivery_state, j.execution_state, j.side_effect_state, j.result_ref) == (
        "acknowledged",
        "succeeded",
        "confirmed",
        "1",
    )
    assert claim(store, "w3", now=100.0) is None, "acknowledged jobs are never reclaimed"


def test_write_without_cas_accepts_a_stale_token(store: LedgerStore) -> None:
    # What the no_cas_on_result mutant does.
    store.enqueue("j-0001", "billing", {"job_id": "j-0001"}, now=0.0)
    c1 = claim(store, "w1", now=10.0)
    c2 = claim(store, "w2", now=11.5)
    assert c1 is not None
    assert c2 is not None
    assert store.write_result(c1, "failed", now=11.6, retry_at=20.0, cas=False)
    assert [w.accepted for w in store.result_writes()] == [True]


def test_idempotency_key_is_unique_across_jobs(store: LedgerStore) -> None:
    store.enqueue("j-0001", "billing", {"job_id": "j-0001"}, now=0.0)
    store.enqueue("j-0002", "billing", {"job_id": "j-0002"}, now=0.0)
    c1 = claim(store, "w1", now=1.0)
    c2 = claim(store, "w2", now=1.0)
    assert c1 is not None
    assert c2 is not None
    assert store.mark_submitted(c1, key="effect-shared", marker=None, now=1.1)
    with pytest.raises(LedgerError, match="already belongs to another job"):
        store.mark_submitted(c2, key="effect-shared", marker=None, now=1.2)
    # The same job may persist its own key again (a retry).
    assert store.mark_submitted(c1, key="effect-shared", marker=None, now=1.3)


def test_unknown_goes_to_the_reconcile_queue(store: LedgerStore) -> None:
    store.enqueue("j-0001", "plain", {"job_id": "j-0001"}, now=0.0)
    c1 = claim(store, "w1", now=1.0)
    assert c1 is not None
    store.mark_submitted(c1, key="effect-j-0001", marker="cm-j-0001", now=1.1)
    assert store.write_result(c1, "unknown", now=1.2, reason="timeout")
    j = job(store)
    assert (j.execution_state, j.side_effect_state, j.delivery_state) == (
        "unknown",
        "ambiguous",
        "leased",
    )
    c2 = claim(store, "w2", now=5.0)
    assert c2 is not None
    assert c2.needs_reconcile
    store.record_reconcile(c2, "unavailable", now=5.1, next_at=5.2)
    store.record_reconcile(c2, "not_found", now=5.3, next_at=5.3)
    assert [(r.attempt, r.outcome) for r in store.reconciles()] == [
        (2, "unavailable"),
        (2, "not_found"),
    ]
    assert store.mark_submitted(c2, key="effect-j-0001", marker="cm-j-0001", now=5.4)
    assert store.write_result(c2, "succeeded", now=5.5, result_ref="7")
    store.enqueue("j-0002", "plain", {"job_id": "j-0002"}, now=6.0)
    c3 = claim(store, "w1", now=6.0)
    assert c3 is not None
    assert not c3.needs_reconcile


def test_failed_attempt_backs_off_then_dead_letters_at_the_cap(store: LedgerStore) -> None:
    store.enqueue("j-0001", "billing", {"job_id": "j-0001"}, now=0.0)
    c1 = claim(store, "w1", now=1.0)
    assert c1 is not None
    assert store.write_result(c1, "failed", now=1.1, retry_at=2.0, reason="http_503")
    assert claim(store, "w1", now=1.5) is None, "not before its backoff"
    c2 = claim(store, "w1", now=2.0)
    assert c2 is not None
    assert c2.attempt == 2
    assert c2.last_error == "http_503"
    assert store.write_result(c2, "failed", now=2.1, retry_at=None, reason="http_503")
    j = job(store)
    assert (j.delivery_state, j.execution_state, j.side_effect_state) == (
        "dead_lettered",
        "failed",
        "not_attempted",
    )


def test_claim_dead_letters_a_job_out_of_attempts(store: LedgerStore) -> None:
    store.enqueue("j-0001", "billing", {"job_id": "j-0001"}, now=0.0)
    now = 0.0
    for _ in range(2):
        c = claim(store, "w1", now=now, cap=2)
        assert c is not None
        store.mark_submitted(c, key="effect-j-0001", marker=None, now=now)
        now += 2 * TTL  # the owner dies
    assert claim(store, "w1", now=now, cap=2) is None
    j = job(store)
    assert j.delivery_state == "dead_lettered"
    assert j.needs_review, "an unresolved call must reach a human, not vanish"
    assert j.attempts == 2


def test_uncapped_claims_keep_going(store: LedgerStore) -> None:
    store.enqueue("j-0001", "billing", {"job_id": "j-0001"}, now=0.0)
    for i in range(5):
        c = claim(store, "w1", now=10.0 * i, cap=None)
        assert c is not None
        assert c.attempt == i + 1


def test_needs_review_stops_automation(store: LedgerStore) -> None:
    store.enqueue("j-0001", "billing", {"job_id": "j-0001"}, now=0.0)
    c = claim(store, "w1", now=1.0)
    assert c is not None
    store.mark_submitted(c, key="effect-j-0001", marker=None, now=1.0)
    assert store.write_result(c, "needs_review", now=1.1, reason="unqueryable")
    j = job(store)
    assert j.needs_review
    assert j.review_reason == "unqueryable"
    assert (j.execution_state, j.side_effect_state) == ("unknown", "ambiguous")
    assert claim(store, "w2", now=100.0) is None


def test_acknowledged_early_job_is_never_reclaimed(store: LedgerStore) -> None:
    # What ack_before_effect does: after a crash the job is gone from the queue.
    store.enqueue("j-0001", "billing", {"job_id": "j-0001"}, now=0.0)
    c = claim(store, "w1", now=1.0)
    assert c is not None
    assert store.acknowledge(c, now=1.0)
    assert claim(store, "w2", now=100.0) is None
    assert job(store).execution_state == "running"


def test_recovery_queues_every_unfinished_job(store: LedgerStore) -> None:
    for n in (1, 2, 3):
        store.enqueue(f"j-000{n}", "billing", {"job_id": f"j-000{n}"}, now=0.0)
    c = claim(store, "w1", now=1.0)
    assert c is not None
    store.write_result(c, "succeeded", now=1.1, result_ref="1")
    assert store.mark_recovery(now=2.0) == 2
    assert store.mark_recovery(now=2.1) == 0
    c2 = claim(store, "w1", now=3.0)
    assert c2 is not None
    assert c2.needs_reconcile


def test_restore_goes_back_but_keeps_tokens_monotonic(store: LedgerStore) -> None:
    store.enqueue("j-0001", "billing", {"job_id": "j-0001"}, now=0.0)
    snap = store.dump()
    c1 = claim(store, "w1", now=1.0)
    assert c1 is not None
    store.mark_submitted(c1, key="effect-j-0001", marker=None, now=1.1)
    store.write_result(c1, "succeeded", now=1.2, result_ref="1")
    store.load(snap)
    j = job(store)
    assert (j.delivery_state, j.side_effect_state) == ("queued", "not_attempted")
    assert (j.token, j.attempts) == (1, 1), "a restore must not reissue a fencing token"
    assert len(store.claims()) == 1, "audit rows survive a restore"
    c2 = claim(store, "w2", now=2.0)
    assert c2 is not None
    assert (c2.token, c2.attempt) == (2, 2)


def test_unknown_outcome_name_is_refused(store: LedgerStore) -> None:
    store.enqueue("j-0001", "billing", {"job_id": "j-0001"}, now=0.0)
    c = claim(store, "w1", now=1.0)
    assert c is not None
    with pytest.raises(ValueError, match="outcome='done' is unknown"):
        store.write_result(c, "done", now=1.1)


STEPS = (("ticket", "tickets"), ("notify", "mailer"))


def test_a_multi_step_job_records_each_step_done_under_its_lease(store: LedgerStore) -> None:
    store.enqueue("j-0001", "tickets", {"job_id": "j-0001"}, now=0.0, steps=STEPS)
    c = claim(store, "w1", now=1.0)
    assert c is not None
    assert (c.steps, c.steps_done) == (STEPS, frozenset())
    assert store.mark_submitted(c, key="effect-j-0001-ticket", marker=None, now=1.1)
    assert store.complete_step(c, "ticket", result_ref="7", now=1.2)
    # The job stays leased, ready for its next step.
    j = job(store)
    assert (j.delivery_state, j.side_effect_state, j.owner) == ("leased", "not_attempted", "w1")
    # A stale owner cannot record a step.
    again = claim(store, "w2", now=1.2 + TTL + 0.1)
    assert again is not None
    assert not store.complete_step(c, "notify", result_ref="8", now=3.0)
    # Whoever takes the job up next reads the step done, and resumes after it.
    assert again.steps_done == frozenset({"ticket"})


def test_a_restore_rolls_step_progress_back(store: LedgerStore) -> None:
    store.enqueue("j-0001", "tickets", {"job_id": "j-0001"}, now=0.0, steps=STEPS)
    before = store.dump()
    c = claim(store, "w1", now=1.0)
    assert c is not None
    assert store.complete_step(c, "ticket", result_ref=None, now=1.1)
    store.load(before)
    later = claim(store, "w2", now=5.0)
    assert later is not None
    assert later.steps_done == frozenset()


def test_a_lost_acknowledgement_delivers_a_done_job_again(store: LedgerStore) -> None:
    store.enqueue("j-0001", "billing", {"job_id": "j-0001"}, now=0.0)
    assert not store.redeliver("j-0001", now=0.5)  # nothing acknowledged yet
    c = claim(store, "w1", now=1.0)
    assert c is not None
    assert store.write_result(c, "succeeded", now=1.1, result_ref="42")
    assert store.redeliver("j-0001", now=2.0)
    again = claim(store, "w2", now=2.1)
    # Delivered again with its records as they were: the worker can tell it is done.
    assert again is not None
    assert (again.execution_state, again.side_effect_state) == ("succeeded", "confirmed")
    assert store.write_result(again, "succeeded", now=2.2)
    assert job(store).result_ref == "42"  # closing it again keeps the reference
