"""Shards run apart and merged later: ``--shard auto`` and the matrix hash.

A Kubernetes Indexed Job gives each pod its index in ``JOB_COMPLETION_INDEX`` (from 0);
``--shard auto/N`` (or ``auto`` with ``CRASHPOINT_SHARDS=N``) turns it into the shard
``index + 1`` of ``N``. Kubernetes replaces a failed pod with one of the same index, so
a shard may be run twice: every trial carries the matrix's hash, its cell and its seed,
and ``crashpoint report`` keeps one result per (hash, cell, seed) and refuses results
of another matrix (``reports.dedupe``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.contract.errors import ConfigError
from harness.plan import Cell

COMPLETION_INDEX = "JOB_COMPLETION_INDEX"
#: The shard count for a bare ``--shard auto``.
SHARDS_ENV = "CRASHPOINT_SHARDS"
#: Target keys that say where the config was read, not what it says.
_WHERE_KEYS = ("config", "config_line")


def resolve_shard(text: str | None, env: Mapping[str, str]) -> str | None:
    """``text`` as ``i/n``: ``auto`` and ``auto/N`` read the pod's index from ``env``."""
    if text is None or not text.startswith("auto"):
        return text
    rest = text.removeprefix("auto")
    if rest and not rest.startswith("/"):
        raise ConfigError(f"--shard {text!r} must be i/n, auto or auto/N")
    total_text = rest[1:] if rest else env.get(SHARDS_ENV, "")
    if not rest and not total_text:
        raise ConfigError(f"--shard auto: set {SHARDS_ENV} to the shard count, or say auto/N")
    total = _whole(total_text, f"--shard {text}: the shard count {total_text!r}")
    if total < 1:
        raise ConfigError(f"--shard {text}: the shard count must be at least 1")
    index_text = env.get(COMPLETION_INDEX)
    if index_text is None:
        raise ConfigError(
            f"--shard {text}: {COMPLETION_INDEX} is not set (an Indexed Job sets it in each "
            "pod); outside one, say --shard i/n"
        )
    index = _whole(index_text, f"--shard {text}: {COMPLETION_INDEX}={index_text!r}")
    if not 0 <= index < total:
        raise ConfigError(
            f"--shard {text}: {COMPLETION_INDEX}={index} is not below the shard count {total}"
        )
    return f"{index + 1}/{total}"


def _whole(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{what} is not a whole number") from None


def matrix_hash(cells: Sequence[Cell], target: Mapping[str, Any]) -> str:
    """A stable hash of the whole matrix (every shard's cells) and the target's config:
    equal for every shard of one run, different once a cell or a key differs."""
    what = {k: v for k, v in target.items() if k not in _WHERE_KEYS}
    doc: dict[str, Any] = {"cells": sorted(c.id for c in cells), "target": what}
    config = target.get("config")
    if isinstance(config, str):
        # The file's content, not its path: two pods mount one config at two paths.
        try:
            doc["config"] = hashlib.sha256(Path(config).read_bytes()).hexdigest()
        except OSError:
            doc["config"] = None
    blob = json.dumps(doc, sort_keys=True, default=str).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()[:16]


def stamp_matrix(doc: dict[str, Any], digest: str) -> None:
    """Write the matrix hash on the run and on each trial, with the trial's cell."""
    doc["matrix_hash"] = digest
    for trial in doc.get("trials", ()):
        trial["matrix_hash"] = digest
        trial["cell"] = trial["id"]
