"""The plan of a run: the matrix cells a selection of the injection table expands into.

A :class:`Cell` is the engine's unit of work (one trial); the table it comes from is
data in :mod:`scenarios.table`, which knows nothing of cells.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.contract.vocabulary import PROVIDER_KINDS
from scenarios.table import NETWORK_POINTS, SCENARIOS, Scenario


@dataclass(frozen=True)
class Cell:
    """One cell of the matrix: a scenario at one point, provider kind and signal."""

    scenario: Scenario
    point: str
    provider: str
    signal: str | None
    ledger: str = "sqlite"
    backend: str = "process"
    mutant: str | None = None

    @property
    def id(self) -> str:
        parts = [self.scenario.name, self.point, self.provider, self.signal or "none"]
        parts += [self.ledger, self.backend]
        if self.mutant:
            parts.insert(0, self.mutant)
        return ".".join(parts)

    @property
    def network(self) -> bool:
        return self.point in NETWORK_POINTS


def cells(
    scenarios: Iterable[Scenario] = SCENARIOS,
    *,
    providers: Sequence[str] = PROVIDER_KINDS,
    signals: Sequence[str] | None = None,
    ledger: str = "sqlite",
    backend: str = "process",
    mutant: str | None = None,
) -> list[Cell]:
    """Expand scenarios into cells, keeping only the providers and signals asked for."""
    out = []
    for s in scenarios:
        if s.ledgers is not None and ledger not in s.ledgers:
            continue
        for point in s.points:
            for provider in s.providers:
                if provider not in providers:
                    continue
                for sig in s.signals:
                    if signals is not None and sig is not None and sig not in signals:
                        continue
                    out.append(Cell(s, point, provider, sig, ledger, backend, mutant))
    return out
