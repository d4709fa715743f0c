"""What a pytest session writes (``harness.pytest_session``), behind the commands: only
the CLI and its commands touch ``reports/`` (docs/internals.md), so the session asks
here for a trial page's path, a worker's shard, the merged report and its own run's."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reports import build_report, write_run
from reports.html import TRIALS_DIR
from reports.json_io import write_json
from reports.pages import safe_stem


def trial_page(out: Path, trial_id: str) -> Path:
    """Where the report under ``out`` draws the trial ``trial_id``."""
    return out / TRIALS_DIR / f"{safe_stem(trial_id)}.html"


def write_shard(doc: Mapping[str, Any], path: Path) -> Path:
    """One xdist worker's results document, for the controller to merge."""
    return write_json(doc, path)


def merge_shards(shards: Sequence[Path], out: Path) -> dict[str, int]:
    """The workers' shards merged into one run and its report under ``out``; the counts."""
    merged = build_report(sorted(shards), out)
    counts: dict[str, int] = dataclasses.asdict(merged.summary)
    return counts


def write_session(doc: Mapping[str, Any], out: Path) -> None:
    """The session's own run (no xdist): its record and reports under ``out``."""
    write_run(doc, out)
