"""A PostgreSQL ledger whose server drops the connection says so by name, and its
idempotent setup is tried again while the server restarts."""

from __future__ import annotations

import itertools
import time

import psycopg
import pytest

from harness.contract.errors import LedgerLinkLost
from scenarios.ledger.postgres import PostgresLedger, _link_kept


def test_a_dropped_connection_is_named_as_the_ledgers() -> None:
    lost = pytest.raises(LedgerLinkLost, match=r"PostgreSQL ledger dropped .*\(server closed\)")
    with lost, _link_kept():
        raise psycopg.OperationalError("server closed\nthe connection unexpectedly")


def test_other_errors_pass_through_unchanged() -> None:
    with pytest.raises(psycopg.errors.UniqueViolation), _link_kept():
        raise psycopg.errors.UniqueViolation("duplicate key")


class _Restarting(PostgresLedger):
    """A ledger whose server drops the first ``drops`` setups, with no server at all."""

    def __init__(self, drops: int) -> None:  # no connection: only setup's retry is used
        self.drops, self.tries = drops, 0

    def _setup(self) -> None:
        self.tries += 1
        if self.tries <= self.drops:
            raise LedgerLinkLost("the PostgreSQL ledger dropped its connection (restart)")


def test_setup_is_tried_again_while_the_server_restarts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda s: None)
    ledger = _Restarting(drops=2)
    ledger.setup()
    assert ledger.tries == 3


def test_setup_gives_up_past_the_reconnect_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = itertools.count(0, 10)
    monkeypatch.setattr(time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(time, "sleep", lambda s: None)
    with pytest.raises(LedgerLinkLost):
        _Restarting(drops=100).setup()
