"""The plan of a run: the matrix cells a selection of the injection table expands into.

A :class:`Cell` is the engine's unit of work (one trial); the table it comes from is
data in :mod:`scenarios.table`, which knows nothing of cells. :func:`select_cells` is
what the command line's filters and ``--shard i/n`` leave of it.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.contract.errors import ConfigError
from harness.contract.vocabulary import PROVIDER_KINDS
from scenarios.table import BY_NAME, NETWORK_POINTS, SCENARIOS, Scenario


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


def select_cells(
    *,
    scenarios: Sequence[str] = (),
    points: Sequence[str] = (),
    providers: Sequence[str] = (),
    signals: Sequence[str] = (),
    ledger: str = "sqlite",
    backend: str = "process",
    mutant: str | None = None,
    shard: str | None = None,
) -> list[Cell]:
    """The cells the filters leave, in table order; unknown names are usage errors."""
    for name in scenarios:
        if name not in BY_NAME:
            raise ConfigError(
                f"--scenario {name!r} is unknown; `crashpoint points` lists the scenarios"
            )
    chosen = [BY_NAME[n] for n in scenarios] if scenarios else list(SCENARIOS)
    known_points = {p for s in chosen for p in s.points}
    for p in points:
        if p not in known_points:
            raise ConfigError(
                f"--point {p!r} is not a point of the chosen scenarios; "
                f"choose from {', '.join(sorted(known_points))}"
            )
    out = cells(
        chosen,
        providers=providers or PROVIDER_KINDS,
        signals=signals or None,
        ledger=ledger,
        backend=backend,
        mutant=mutant,
    )
    if points:
        out = [c for c in out if c.point in points]
    if not out:
        raise ConfigError("the filters leave no cell to run; `crashpoint points` lists them")
    if shard:
        index, count = parse_shard(shard)
        mine = take_shard(out, index, count)
        if not mine:
            raise ConfigError(
                f"--shard {shard}: none of the {len(out)} cells the filters leave falls in "
                "this shard; use fewer shards"
            )
        out = mine
    return out


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` as ``(i, n)``, with 1 <= i <= n."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ConfigError(f"--shard {text!r} must look like i/n, for example 1/4") from None
    if not 1 <= i <= n:
        raise ConfigError(f"--shard {text!r}: i must be between 1 and n")
    return i, n


def shard_of(cell: Cell, count: int) -> int:
    """The shard (1..count) ``cell`` belongs to: a hash of its id, not its position, so
    a scenario added to the table moves no existing cell to another shard."""
    return zlib.crc32(cell.id.encode()) % count + 1


def take_shard(cells: Sequence[Cell], index: int, count: int) -> list[Cell]:
    """The cells of shard ``index`` of ``count``, in their order."""
    return [c for c in cells if shard_of(c, count) == index]
