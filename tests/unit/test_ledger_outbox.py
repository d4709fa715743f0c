"""The outbox in the ledger, the same suite on SQLite (unit tier) and PostgreSQL (process
tier): the message is written with the attempt's close, the job waits unclaimable for the
relay, and marking the row sent acknowledges the job exactly once."""

from __future__ import annotations

from scenarios.ledger import LedgerStore
from tests.unit.test_ledger_states import claim, job, store

__all__ = ["store"]


def test_the_message_is_written_with_the_attempts_close(store: LedgerStore) -> None:
    store.enqueue("j-0001", "svc", {"job_id": "j-0001", "n": 1}, now=0.0)
    c = claim(store, "w1", now=1.0)
    assert c is not None
    assert store.write_outbox(c, outbox_id="outbox-j-0001", now=1.1)
    [row] = store.pending_outbox()
    assert (row.outbox_id, row.job_id, row.provider, row.body, row.sends) == (
        "outbox-j-0001",
        "j-0001",
        "svc",
        {"job_id": "j-0001", "n": 1},
        0,
    )
    j = job(store)
    assert (j.delivery_state, j.execution_state, j.side_effect_state) == (
        "leased",
        "succeeded",
        "submitted",
    )
    assert (j.owner, j.lease_expires_at, j.idempotency_key) == (None, None, "outbox-j-0001")
    # Waiting for the relay: no worker claims it again, however late.
    assert claim(store, "w2", now=1_000.0) is None
    assert store.result_writes()[-1].outcome == "outboxed"


def test_a_stale_owner_writes_no_message(store: LedgerStore) -> None:
    store.enqueue("j-0001", "svc", {"job_id": "j-0001"}, now=0.0)
    stale = claim(store, "w1", now=1.0)
    assert stale is not None
    assert claim(store, "w2", now=5.0) is not None  # w1's lease ran out
    assert not store.write_outbox(stale, outbox_id="outbox-j-0001", now=5.1)
    assert store.pending_outbox() == []
    assert not store.result_writes()[-1].accepted


def test_sends_are_counted_and_sent_acknowledges_once(store: LedgerStore) -> None:
    store.enqueue("j-0001", "svc", {"job_id": "j-0001"}, now=0.0)
    c = claim(store, "w1", now=1.0)
    assert c is not None
    store.write_outbox(c, outbox_id="outbox-j-0001", now=1.1)
    assert store.count_outbox_send("outbox-j-0001") == 1
    assert store.count_outbox_send("outbox-j-0001") == 2
    assert store.pending_outbox()[0].sends == 2
    assert store.mark_outbox_sent("outbox-j-0001", result_ref="rec_svc_000001", now=2.0)
    assert not store.mark_outbox_sent("outbox-j-0001", result_ref="rec_svc_000002", now=3.0)
    assert store.pending_outbox() == []
    [row] = store.outbox()
    assert (row.state, row.result_ref) == ("sent", "rec_svc_000001")
    j = job(store)
    assert (j.delivery_state, j.side_effect_state, j.result_ref) == (
        "acknowledged",
        "confirmed",
        "rec_svc_000001",
    )


def test_the_outbox_is_state_a_restore_puts_back(store: LedgerStore) -> None:
    store.enqueue("j-0001", "svc", {"job_id": "j-0001"}, now=0.0)
    c = claim(store, "w1", now=1.0)
    assert c is not None
    store.write_outbox(c, outbox_id="outbox-j-0001", now=1.1)
    snap = store.dump()
    store.mark_outbox_sent("outbox-j-0001", result_ref="r", now=2.0)
    store.load(snap)
    assert [r.state for r in store.outbox()] == ["pending"]
