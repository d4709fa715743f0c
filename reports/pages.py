"""File names for trial pages: safe on every filesystem and in a URL, unique per trial."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from reports.model import TrialRow

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_STEM = 120


def safe_stem(key: str) -> str:
    """``key`` reduced to ``[A-Za-z0-9._-]``; a hash suffix keeps altered keys distinct."""
    stem = _UNSAFE.sub("_", key).strip("._") or "trial"
    if stem != key or len(stem) > _MAX_STEM:
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:8]
        stem = f"{stem[:_MAX_STEM]}-{digest}"
    return stem


def page_stems(trials: Iterable[TrialRow]) -> dict[str, str]:
    """Trial key -> page stem, unique even when two keys only differ in case."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for trial in trials:
        stem = safe_stem(trial.key)
        # Case-insensitive filesystems (macOS, Windows runners) would fold two names.
        while stem.lower() in taken:
            stem = f"{stem}-{hashlib.sha256(stem.encode()).hexdigest()[:4]}"
        taken.add(stem.lower())
        out[trial.key] = stem
    return out
