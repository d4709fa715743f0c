"""The reference target worker, its ledger stores and mutants, and the injection table.

``ReferenceTarget`` is the in-process adapter the harness drives; the worker itself runs
as ``python -m scenarios.worker``; ``MUTANTS`` are its deliberately broken variants.

The names below are re-exported lazily: a worker process (``python -m scenarios.worker``)
imports this package first, and must not pay for the adapter it never uses at each
start (a trial starts one to three of them).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.contract.vocabulary import INVARIANTS
    from scenarios.ledger import ClaimRow, JobRow, ReconcileRow, ResultWriteRow
    from scenarios.mutants import MUTANTS, Mutant
    from scenarios.reference import LedgerView, ReferenceTarget, Snapshot

_LAZY = {
    "INVARIANTS": "harness.contract.vocabulary",
    "ClaimRow": "scenarios.ledger",
    "JobRow": "scenarios.ledger",
    "ReconcileRow": "scenarios.ledger",
    "ResultWriteRow": "scenarios.ledger",
    "MUTANTS": "scenarios.mutants",
    "Mutant": "scenarios.mutants",
    "LedgerView": "scenarios.reference",
    "ReferenceTarget": "scenarios.reference",
    "Snapshot": "scenarios.reference",
}

__all__ = [
    "INVARIANTS",
    "MUTANTS",
    "ClaimRow",
    "JobRow",
    "LedgerView",
    "Mutant",
    "ReconcileRow",
    "ReferenceTarget",
    "ResultWriteRow",
    "Snapshot",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'scenarios' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
