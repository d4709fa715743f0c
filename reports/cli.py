"""What ``crashpoint report`` and the runner call: merge, then write every format.

``harness.cli`` owns the click command; this module owns what it does, so the command
stays a thin wrapper and the runner can write the same files after every run.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reports.html import write_html
from reports.json_io import write_results
from reports.junit import write_junit
from reports.markdown import markdown_summary
from reports.merge import merge
from reports.model import Results
from reports.parse import load_results


@dataclass(frozen=True)
class ReportFiles:
    """Where ``write_all`` put each output."""

    results_json: Path
    index_html: Path
    junit_xml: Path
    summary_md: Path


def write_all(
    results: Results,
    out_dir: str | Path,
    *,
    self_contained: bool = False,
    generated_at: dt.datetime | None = None,
) -> ReportFiles:
    """Write ``results.json``, ``index.html`` (+ pages), ``junit.xml`` and ``summary.md``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = out / "summary.md"
    summary.write_text(markdown_summary(results), encoding="utf-8")
    return ReportFiles(
        results_json=write_results(results, out / "results.json"),
        index_html=write_html(
            results, out, self_contained=self_contained, generated_at=generated_at
        ),
        junit_xml=write_junit(results, out / "junit.xml"),
        summary_md=summary,
    )


def build_report(paths: Sequence[Path], out_dir: Path, *, self_contained: bool = False) -> Results:
    """``crashpoint report RESULTS.json ... --out DIR``: merge the shards, write everything.

    Raises ``ConfigError`` (exit 2) naming the file and key of any malformed input, and
    for two different trials claiming one id within one run (see ``reports.merge``).
    """
    results = merge([load_results(p) for p in paths])
    write_all(results, out_dir, self_contained=self_contained)
    return results
