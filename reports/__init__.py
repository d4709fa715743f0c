"""Results model and renderers: static HTML, JSON, JUnit XML and a Markdown summary.

Everything here reads a ``Results`` (from ``load_results`` or built by the runner) and
never the harness's internals, so a report can be rebuilt from stored files alone.
"""

from __future__ import annotations

from reports.html import write_html
from reports.json_io import results_to_dict, write_results
from reports.junit import write_junit
from reports.markdown import markdown_summary
from reports.merge import merge
from reports.model import (
    Evidence,
    KillMatrix,
    MutantResult,
    Results,
    Summary,
    Target,
    TimelineEvent,
    TrialRow,
    ViolationRow,
)
from reports.outputs import ReportFiles, build_report, write_all, write_run
from reports.parse import load_results, results_from_dict

__all__ = [
    "Evidence",
    "KillMatrix",
    "MutantResult",
    "ReportFiles",
    "Results",
    "Summary",
    "Target",
    "TimelineEvent",
    "TrialRow",
    "ViolationRow",
    "build_report",
    "load_results",
    "markdown_summary",
    "merge",
    "results_from_dict",
    "results_to_dict",
    "write_all",
    "write_html",
    "write_junit",
    "write_results",
    "write_run",
]
