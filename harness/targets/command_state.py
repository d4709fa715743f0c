"""A command target's state directory under ``state_store_restore``: whether a restore
can reach the worker's ledger at all, a copy of the directory, and its contents put back.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from harness.targets.config import CommandConfig


def restore_unsupported(config: CommandConfig) -> str | None:
    """Why ``state_store_restore`` cannot run against this target, or None when it can:
    a restore puts back the worker's state directory, so a ledger elsewhere is out of
    its reach."""
    dsn = config.ledger_dsn
    if dsn is None:
        return None
    if dsn.startswith(("postgresql://", "postgres://")):
        return (
            f"{config.path}: target.ledger.dsn is a PostgreSQL database, which every trial "
            "of the run shares: restoring it would mean dropping and reloading the user's "
            "database, which the harness does not do; keep the ledger in the worker's "
            "state directory (a relative sqlite:/// path) to run state_store_restore"
        )
    if dsn.startswith("sqlite:///") and not Path(dsn.removeprefix("sqlite:///")).is_absolute():
        return None
    return (
        f"{config.path}: target.ledger.dsn {dsn!r} lies outside the worker's state "
        "directory, which is what a restore puts back; use a relative sqlite:/// path"
    )


def copy_state(state_dir: Path, copy: Path) -> Path:
    """``state_dir`` copied to ``copy`` (symlinks as links), while no worker runs."""
    shutil.copytree(state_dir, copy, symlinks=True)
    return copy


def replace_state(state_dir: Path, snapshot: Path) -> None:
    """``state_dir``'s contents replaced by ``snapshot``'s; no worker runs."""
    for child in state_dir.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    shutil.copytree(snapshot, state_dir, symlinks=True, dirs_exist_ok=True)
