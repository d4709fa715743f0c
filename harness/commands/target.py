"""Which target a command aims at: ``-c crashpoint.toml``, or the reference worker with
an optional ``--mutant``; checked once, the same way for run, explore and replay.

With none of ``-c``, ``--target`` and ``--mutant``, ``run`` and ``explore`` look in the
working directory as ``check-config`` and ``pytest --crashpoint`` do: a user who runs
``crashpoint run`` beside their ``crashpoint.toml`` means their worker, and testing the
built-in one instead, under their providers' names, with exit 0, told them nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.contract.errors import ConfigError

if TYPE_CHECKING:
    from harness.targets.config import ProviderDecl


@dataclass(frozen=True)
class ResolvedTarget:
    """What -c / --target / --mutant name: the command config (or None), its record in
    results.json, the flags that name it again, and the provider kinds to explore."""

    command: Any
    doc: dict[str, Any]
    flags: list[str]
    declared: list[tuple[str, str]] | None
    lease_ttl_s: float | None
    max_attempts: int | None
    #: The configuration file read, or None for the reference worker.
    config_path: Path | None = None
    #: Why this target: the terminal's first line says it.
    source: str = ""

    def headline(self) -> str:
        """The run's first line: which target, from which file (or why the built-in one)."""
        name = self.doc["name"]
        if self.doc.get("mutant"):
            name += f" with mutant {self.doc['mutant']}"
        return f"target: {name} ({self.source})"


def resolve_target(
    config_path: Path | None,
    target: str | None,
    mutant: str | None,
    *,
    discover_in: Path | None = None,
) -> ResolvedTarget:
    """The target named by the flags; with none of them and ``discover_in`` given, the
    configuration found there (``crashpoint.toml``, then ``[tool.crashpoint]``), and
    the reference worker only when nothing is declared there."""
    source = "-c" if config_path is not None else "--target reference"
    if config_path is None and target is None and mutant is None and discover_in is not None:
        from harness.targets.config import find_declared

        config_path = find_declared(discover_in)
        source = (
            "found here"
            if config_path is not None
            else f"built in: no crashpoint.toml or [tool.crashpoint] in {discover_in}"
        )
    elif mutant is not None and target is None:
        source = "--mutant"
    if config_path is not None:
        if mutant is not None:
            raise ConfigError("--mutant applies to the reference target only, not to -c")
        return _command_target(config_path, source)
    target = target or "reference"
    if target != "reference":
        raise ConfigError(f"--target {target!r} is unknown; use reference or -c crashpoint.toml")
    if mutant is not None:
        from scenarios.mutants import MUTANTS

        if mutant not in MUTANTS:
            raise ConfigError(
                f"--mutant {mutant!r} is unknown; choose from {', '.join(sorted(MUTANTS))}"
            )
    from harness.targets.reference import MAX_ATTEMPTS

    flags = ["--mutant", mutant] if mutant else []
    doc = {"name": "reference", "kind": "reference", "mutant": mutant}
    return ResolvedTarget(None, doc, flags, None, None, MAX_ATTEMPTS, source=source)


def _command_target(config_path: Path, source: str) -> ResolvedTarget:
    """The worker ``config_path`` describes, and its record in results.json."""
    from harness.targets.config import load_config

    command = load_config(config_path)
    declared = [(p.name, p.kind) for p in command.providers]
    return ResolvedTarget(
        command,
        {
            "name": command.name,
            "kind": "command",
            "mutant": None,
            "providers": [
                {"name": p.name, "kind": p.kind, "persona": p.persona} for p in command.providers
            ],
            "config": str(config_path),
            "config_line": target_line(config_path),
        },
        ["-c", str(config_path)],
        declared,
        command.lease_ttl_s,
        command.max_attempts,
        config_path=config_path,
        source=f"{config_path}, {source}" if source == "found here" else str(config_path),
    )


def by_persona(asked: Sequence[str], declared: Sequence[ProviderDecl]) -> tuple[str, ...]:
    """``--provider`` values with each persona (``stripe``) replaced by the names of the
    declared providers that speak it, so a user may filter by the API as the file spells
    it; a persona no provider speaks stays, and the matrix's check names it."""
    out: list[str] = []
    for value in asked:
        speaking = [p.name for p in declared if p.persona == value]
        out.extend(speaking or [value])
    return tuple(dict.fromkeys(out))


def target_line(config_path: Path) -> int:
    """The line of the ``[target]`` table in ``config_path`` (1 when there is none): a
    finding with no failpoint line of its own is located there (sarif.json)."""
    heads = ("[target]", "[tool.crashpoint.target]", "[tool.crashpoint]")
    try:
        lines = config_path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return 1
    for head in heads:
        for n, text in enumerate(lines, 1):
            if text.strip().startswith(head):
                return n
    return 1
