"""A run's outputs: ``results.json``, ``index.html`` (+ pages), ``junit.xml``, ``sarif.json``,
``summary.md``.

``write_run`` is what a finished run calls with the document the engine built;
``write_all`` rewrites the same files from a ``Results`` (a merge, a golden test);
``build_report`` is what ``crashpoint report`` does. All three share one writer per file.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reports.html import write_html
from reports.json_io import write_json, write_results
from reports.junit import write_junit
from reports.markdown import markdown_summary
from reports.merge import merge
from reports.model import Results
from reports.parse import load_results
from reports.sarif import write_sarif


@dataclass(frozen=True)
class ReportFiles:
    """Where each output was written."""

    results_json: Path
    index_html: Path
    junit_xml: Path
    summary_md: Path
    sarif_json: Path


def write_run(doc: Mapping[str, Any], out_dir: str | Path) -> ReportFiles:
    """Write a run's document as ``results.json``, then every report drawn from it.

    The document goes to disk first and unchanged (it is the record, and keeps keys the
    report model does not read); the reports are drawn from the stored file, so they
    show exactly what was written.
    """
    out = Path(out_dir)
    path = write_json(doc, out / "results.json")
    return _write_reports(load_results(path), out, results_json=path)


def write_all(
    results: Results,
    out_dir: str | Path,
    *,
    self_contained: bool = False,
    generated_at: dt.datetime | None = None,
) -> ReportFiles:
    """Write ``results`` as ``results.json`` and every report."""
    out = Path(out_dir)
    path = write_results(results, out / "results.json")
    return _write_reports(
        results,
        out,
        results_json=path,
        self_contained=self_contained,
        generated_at=generated_at,
    )


def build_report(paths: Sequence[Path], out_dir: Path, *, self_contained: bool = False) -> Results:
    """``crashpoint report RESULTS.json ... --out DIR``: merge the shards, write everything.

    Raises ``ConfigError`` (exit 2) naming the file and key of any malformed input, and
    for two different trials claiming one id within one run (see ``reports.merge``).
    """
    results = merge([load_results(p) for p in paths], [str(p) for p in paths])
    write_all(results, out_dir, self_contained=self_contained)
    return results


def _write_reports(
    results: Results,
    out: Path,
    *,
    results_json: Path,
    self_contained: bool = False,
    generated_at: dt.datetime | None = None,
) -> ReportFiles:
    summary = out / "summary.md"
    summary.write_text(markdown_summary(results), encoding="utf-8")
    return ReportFiles(
        results_json=results_json,
        index_html=write_html(
            results, out, self_contained=self_contained, generated_at=generated_at
        ),
        junit_xml=write_junit(results, out / "junit.xml"),
        summary_md=summary,
        sarif_json=write_sarif(results, out / "sarif.json"),
    )
