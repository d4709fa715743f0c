"""The cell a custom scenario's trial is filed under, and its provider kind."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.contract.errors import ConfigError
from harness.plan import Cell
from scenarios.table import Scenario

if TYPE_CHECKING:
    from harness.targets.config import CommandConfig

#: The injection point a custom trial is filed under in results.json and the report.
CUSTOM_POINT = "custom"


def custom_cell(
    name: str,
    *,
    provider: str,
    ledger: str = "sqlite",
    backend: str = "process",
    description: str | None = None,
) -> Cell:
    """The cell a custom trial is filed under: its own scenario at :data:`CUSTOM_POINT`."""
    scenario = Scenario(
        name,
        description or "a custom scenario",
        "every invariant holds",
        "as the scenario drives it",
        points=(CUSTOM_POINT,),
        providers=(provider,),
    )
    return Cell(scenario, CUSTOM_POINT, provider, None, ledger, backend)


def provider_kind(command: CommandConfig | None, wanted: str | None) -> str:
    """The provider kind of a custom trial: the target's own for a command target (its
    first provider, by kind or name), else ``wanted`` (default ``idempotent``)."""
    if command is None:
        return wanted or "idempotent"
    first = command.providers[0]
    if wanted is not None and wanted not in (first.kind, first.name):
        raise ConfigError(
            f"{command.path}: provider {wanted!r} is not the target's; its provider is "
            f"{first.name} ({first.kind})"
        )
    return first.kind
