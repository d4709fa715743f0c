"""Where a trial's time goes: seconds per phase, summed over the trial.

The phases are the harness's own steps (starting providers and workers, setting up the
ledger and the rendezvous, waiting for quiescence, the oracle, teardown); results.json
keeps them under ``timings`` as ``<phase>_s``, and ``nox -s bench`` reports their medians.

Beside them a trial reports how its time splits:

- ``waits_s``: the deliberate waits, where the trial's time is its workers' or a rule's,
  not the harness's: a worker running to its boundary or a provider hold
  (``Trial.wait_hit``, ``Trial.wait_held``), a lease running out (``Trial.sleep``), the
  settle pause and the poll intervals while waiting for quiescence.
- ``overhead_s``: the trial's duration less its waits, so everything else the harness
  did: every phase above, and the reads of the ledger and the history made between the
  waits for quiescence. ``quiescence_s`` is the whole of that wait, its reads included:
  it is not the waits' part of the trial, and is not subtracted from the overhead.
- ``worker_s``: the workers' lifetimes added up (several may run at once).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

#: Every phase a trial reports, in the order they happen.
PHASES = (
    "provider",
    "ledger",
    "rendezvous",
    "spawn",
    "quiescence",
    "record",
    "oracle",
    "teardown",
)


class Phases:
    """Seconds spent in each phase; safe to add to from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._s: dict[str, float] = dict.fromkeys(PHASES, 0.0)

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.add(phase, time.monotonic() - t0)

    def add(self, phase: str, seconds: float) -> None:
        if phase not in self._s:
            raise KeyError(f"no phase {phase!r}; add it to harness.phases.PHASES")
        with self._lock:
            self._s[phase] += seconds

    def as_timings(self) -> dict[str, float]:
        """``{"<phase>_s": seconds}`` for every phase (0.0 for one that never ran)."""
        with self._lock:
            return {f"{name}_s": s for name, s in self._s.items()}
