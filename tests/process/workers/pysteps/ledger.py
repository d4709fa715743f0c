"""The queue every part of this target shares: the reference ledger, in the state dir."""

from __future__ import annotations

import os

from scenarios.ledger import LedgerStore, open_ledger

DSN = "sqlite:///ledger.db"


def open_queue() -> LedgerStore:
    store = open_ledger(DSN, base_dir=os.environ.get("CRASHPOINT_STATE_DIR") or os.getcwd())
    store.setup()
    return store
