"""Cancel requests in the ledger (SQLite in the unit tier, PostgreSQL in the process
tier): recorded once, read back by job, untouched by a restore of the state tables."""

from __future__ import annotations

from scenarios.ledger import LedgerStore
from tests.unit.test_ledger_states import store

__all__ = ["store"]


def test_a_cancel_is_recorded_once_and_read_by_job(store: LedgerStore) -> None:
    store.enqueue("j-0001", "svc", {"job_id": "j-0001"}, now=0.0)
    assert not store.cancel_requested("j-0001")
    assert store.request_cancel("j-0001", now=1.0)
    assert not store.request_cancel("j-0001", now=2.0)  # asked again: already recorded
    assert store.cancel_requested("j-0001")
    assert not store.cancel_requested("j-0002")


def test_a_restore_keeps_the_cancels(store: LedgerStore) -> None:
    store.enqueue("j-0001", "svc", {"job_id": "j-0001"}, now=0.0)
    before = store.dump()
    store.request_cancel("j-0001", now=1.0)
    store.load(before)
    assert store.cancel_requested("j-0001")
