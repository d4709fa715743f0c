"""Where a trial's time goes: seconds per phase, summed over the trial.

The phases are the harness's own steps (starting providers and workers, setting up the
ledger and the rendezvous, waiting for quiescence, the oracle, teardown); results.json
keeps them under ``timings`` as ``<phase>_s``, and ``nox -s bench`` reports their medians.
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
