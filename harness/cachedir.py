"""Where crashpoint keeps what outlives a run: ``$CRASHPOINT_CACHE``, else
``~/.cache/crashpoint`` (the Toxiproxy build, the run's processes' bytecode)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("CRASHPOINT_CACHE"):
        return Path(env["CRASHPOINT_CACHE"])
    return Path(env.get("HOME") or Path.home()) / ".cache" / "crashpoint"
