"""The plan of a run: the matrix cells a selection of the injection table expands into.

A :class:`Cell` is the engine's unit of work (one trial); the table it comes from is
data in :mod:`scenarios.table`, which knows nothing of cells. :func:`select_cells` is
what the command line's filters and ``--shard i/n`` leave of it.

The reference worker calls one provider, of whatever kind the cell has. A command target
declares its providers (name and kind) in ``crashpoint.toml``: each scenario runs against
every declared provider whose kind it supports, so a worker that calls two providers has
both faulted, and two providers of one kind are two cells.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.contract.errors import ConfigError
from harness.contract.vocabulary import PROVIDER_KINDS
from scenarios.table import BY_NAME, NETWORK_POINTS, SCENARIOS, Scenario, step_points

#: A declared provider as the plan sees it: ``(name, kind)``.
ProviderDecl = tuple[str, str]
#: A command target's multi-step job as the plan sees it: ``(step, provider)`` in order.
StepDecl = tuple[str, str]


@dataclass(frozen=True)
class Cell:
    """One cell of the matrix: a scenario at one point, provider and signal.

    ``provider`` is the kind; ``provider_name`` the declared provider the faults aim at,
    None for the reference target (its one provider takes the cell's kind).
    """

    scenario: Scenario
    point: str
    provider: str
    signal: str | None
    ledger: str = "sqlite"
    backend: str = "process"
    mutant: str | None = None
    provider_name: str | None = None

    @property
    def id(self) -> str:
        # The name keeps two providers of one kind apart; the reference's ids keep the kind.
        where = self.provider_name or self.provider
        parts = [self.scenario.name, self.point, where, self.signal or "none"]
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
    declared: Sequence[ProviderDecl] | None = None,
    steps: Sequence[StepDecl] = (),
) -> list[Cell]:
    """Expand scenarios into cells, keeping only the providers and signals asked for.

    ``declared`` is a command target's providers: each scenario is crossed with those of
    them whose kind it supports (a provider passes ``providers`` by its kind or its name),
    and, since such a target's own queue redelivers a job, a scenario's
    ``redelivery_providers`` apply. Without it, the kinds themselves are crossed.

    A multi-step scenario runs for such a target only when it declares ``steps``: at the
    boundaries of its own steps, aimed at its first step's provider.
    """
    out = []
    for s in scenarios:
        if s.ledgers is not None and ledger not in s.ledgers:
            continue
        if declared is not None and s.steps and not steps:
            continue
        if declared is None:
            targets: list[tuple[str, str | None]] = [(k, None) for k in s.providers]
        else:
            kinds = s.redelivery_providers or s.providers
            targets = [(kind, name) for name, kind in declared if kind in kinds]
            if s.steps:
                targets = [(kind, name) for kind, name in targets if name == steps[0][1]]
        for point in points_of(s, declared=declared, steps=steps):
            for kind, name in targets:
                if kind not in providers and name not in providers:
                    continue
                for sig in s.signals:
                    if signals is not None and sig is not None and sig not in signals:
                        continue
                    out.append(Cell(s, point, kind, sig, ledger, backend, mutant, name))
    return out


def points_of(
    s: Scenario, *, declared: Sequence[ProviderDecl] | None, steps: Sequence[StepDecl]
) -> tuple[str, ...]:
    """The scenario's points: a command target's multi-step job has its own steps'."""
    if s.steps and declared is not None:
        return step_points(tuple(name for name, _ in steps)) if steps else ()
    return s.points


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
    declared: Sequence[ProviderDecl] | None = None,
    steps: Sequence[StepDecl] = (),
) -> list[Cell]:
    """The cells the filters leave, in table order; unknown names are usage errors.

    ``providers`` filters by kind, or by a declared provider's name.
    """
    for name in scenarios:
        if name not in BY_NAME:
            raise ConfigError(
                f"--scenario {name!r} is unknown; `crashpoint points` lists the scenarios"
            )
    _check_providers(providers, declared)
    chosen = [BY_NAME[n] for n in scenarios] if scenarios else list(SCENARIOS)
    known_points = {p for s in chosen for p in points_of(s, declared=declared, steps=steps)}
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
        declared=declared,
        steps=steps,
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


def _check_providers(asked: Sequence[str], declared: Sequence[ProviderDecl] | None) -> None:
    """Each ``--provider`` names a kind, or (for a command target) a declared provider."""
    known = {x for decl in declared for x in decl} if declared is not None else PROVIDER_KINDS
    for p in asked:
        if p in known:
            continue
        if declared is None:
            raise ConfigError(
                f"--provider {p!r} is not a provider kind; choose from {', '.join(PROVIDER_KINDS)}"
            )
        names = ", ".join(f"{name} ({kind})" for name, kind in declared)
        raise ConfigError(
            f"--provider {p!r} is neither the name nor the kind of a declared provider; "
            f"the target declares {names}"
        )


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
