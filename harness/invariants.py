"""The names of the oracle's seven invariants.

Kept free of imports: the reference worker imports it at every start (through its
mutants' registry), and a worker's start-up is on every trial's path.
"""

from __future__ import annotations

INVARIANTS = (
    "no_duplicate_effect",
    "no_retry_while_unknown",
    "stable_key_and_payload",
    "fenced_writes",
    "nothing_lost",
    "bounded_retries",
    "ambiguity_goes_to_review",
)
