"""The reference target worker, its ledger stores and mutants, and the injection table.

``ReferenceTarget`` is the in-process adapter the harness drives; the worker itself runs
as ``python -m scenarios.worker``; ``MUTANTS`` are its deliberately broken variants.
"""

from __future__ import annotations

from harness.contract.vocabulary import INVARIANTS
from scenarios.ledger import ClaimRow, JobRow, ReconcileRow, ResultWriteRow
from scenarios.mutants import MUTANTS, Mutant
from scenarios.reference import LedgerView, ReferenceTarget, Snapshot

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
