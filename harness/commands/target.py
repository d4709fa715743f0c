"""Which target a command aims at: ``-c crashpoint.toml``, or the reference worker with
an optional ``--mutant``; checked once, the same way for run, explore and replay."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.contract.errors import ConfigError


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


def resolve_target(config_path: Path | None, target: str, mutant: str | None) -> ResolvedTarget:
    if config_path is not None:
        from harness.targets.command import load_config

        if mutant is not None:
            raise ConfigError("--mutant applies to the reference target only, not to -c")
        command = load_config(config_path)
        declared = [(p.name, p.kind) for p in command.providers]
        return ResolvedTarget(
            command,
            {"name": command.name, "kind": "command", "mutant": None},
            ["-c", str(config_path)],
            declared,
            command.lease_ttl_s,
            command.max_attempts,
        )
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
    return ResolvedTarget(None, doc, flags, None, None, MAX_ATTEMPTS)
