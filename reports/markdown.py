"""A short Markdown summary for a CI job summary (``$GITHUB_STEP_SUMMARY`` and the like).

CI pages render this Markdown as HTML, so worker text is escaped for Markdown and HTML
both: table cells must not break out with ``|``, inline code must not end early.
"""

from __future__ import annotations

import re

from harness.contract.vocabulary import Verdict
from reports.desk import review_desk
from reports.headline import run_status
from reports.matrix import build_matrix
from reports.model import Results, TrialRow

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~>-])")
_ICONS = {
    "held": "✅",
    "violated": "❌",
    "not_reached": "⭕",
    "inconclusive": "❔",
    "skipped": "⏭️",
    "empty": "⚠️",
}


def md_text(value: str) -> str:
    """Plain text safe in a Markdown paragraph or table cell (one line, nothing active)."""
    value = " ".join(value.split())
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", value)


def md_code(value: str) -> str:
    """Inline code holding ``value`` verbatim, whatever backticks it contains."""
    value = " ".join(value.split()).replace("|", "\\|")
    longest = max((len(m) for m in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def markdown_summary(results: Results) -> str:
    s = results.summary
    matrix = build_matrix(results)
    held_cells, covered_cells = matrix.covered
    whose = "of the correct worker's cells" if "mutant" in matrix.dimensions else "cells"
    km = results.kill_matrix
    # In a selftest a mutant's violation is a kill, the outcome wanted: the headline and
    # the violated list are the correct worker's, and the kill matrix tells the mutants'.
    own = [t for t in results.trials if km is None or t.mutant is None]
    worst = run_status(results)
    lines = [
        f"## {_ICONS[worst]} crashpoint: {md_text(results.target.name)} "
        f"(run {md_code(results.run_id)})",
        "",
        "| total | held | violated | inconclusive | skipped | not reached | coverage |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {s.total} | {s.held} | {s.violated} | {s.inconclusive} | {s.skipped} "
        f"| {s.not_reached} | {held_cells}/{covered_cells} {whose} held "
        f"({matrix.coverage:.0%}) |",
        "",
    ]
    if not s.total:
        lines += ["No trials ran: nothing was proven.", ""]
    violated = [t for t in own if t.verdict == Verdict.VIOLATED]
    if violated:
        lines += [
            "### Violated cells",
            "",
            "| trial | invariants (jobs) | replay |",
            "|---|---|---|",
        ]
        lines += [_violation_row(t) for t in violated]
        lines.append("")
    warned = [t for t in results.trials if t.warnings]
    if warned:
        lines += [f"### Warnings: {s.warnings} (they break no invariant)", ""]
        lines += [
            f"- {md_code(t.key)}: "
            + "; ".join(f"{md_code(w.invariant)} {md_text(w.message)}" for w in t.warnings)
            for t in warned
        ]
        lines.append("")
    desk = review_desk(results)
    lines += [
        f"Review desk: {len(desk)} {'job' if len(desk) == 1 else 'jobs'} in needs_review.",
        "",
    ]
    if desk:
        lines += ["| job | trial | key | action | last error |", "|---|---|---|---|---|"]
        lines += [
            f"| {md_code(r.job)} | {md_code(r.trial.key)} | {md_code(r.key or '—')} "
            f"| {md_text(r.action)} | {md_text(r.last_error or 'none recorded')} |"
            for r in desk
        ]
        lines.append("")
    unsure = [t for t in results.trials if t.status in ("inconclusive", "not_reached")]
    if unsure:
        lines += ["### Not proven", ""]
        lines += [
            f"- {_ICONS[t.status]} {md_code(t.key)}: {md_text(t.reason or t.status)}"
            for t in unsure
        ]
        lines.append("")
    if km is not None:
        lines += [
            f"### Kill matrix: {km.killed} of {len(km.mutants)} mutants killed",
            "",
            "| mutant | result | expected invariant | caught by |",
            "|---|---|---|---|",
        ]
        for m in km.mutants:
            result = "✅ killed" if m.killed else "❌ survived"
            caught = ", ".join(md_code(i) for i in m.invariants) or "—"
            expected = md_code(m.expected_invariant) if m.expected_invariant else "—"
            lines.append(f"| {md_code(m.name)} | {result} | {expected} | {caught} |")
        if km.correct_trials is not None:
            lines += [
                "",
                f"Correct worker: {km.correct_trials} trials, "
                f"{km.correct_violations or 0} violations.",
            ]
        if km.mode == "until_killed":
            lines += [
                "",
                "Each mutant ran until a trial caught it by the invariant it predicts; its "
                "other cells were skipped (`crashpoint selftest --full` runs them all).",
            ]
        lines.append("")
    return "\n".join(lines)


#: Jobs named per invariant in the summary; the rest are counted ("and 3 more").
MAX_JOBS_SHOWN = 5


def _violation_row(t: TrialRow) -> str:
    invariants = "; ".join(invariant_jobs(t)) or "—"
    return f"| {md_code(t.key)} | {invariants} | {md_code(t.replay)} |"


def invariant_jobs(t: TrialRow) -> list[str]:
    """One entry per violated invariant, with the jobs it was found for:
    ``no_duplicate_effect`` (3 jobs: ``j-0001``, ``j-0002``, ``j-0003``), never the same
    invariant once per job."""
    jobs: dict[str, dict[str, None]] = {}
    for v in t.violations:
        jobs.setdefault(v.invariant, {})
        if v.job:
            jobs[v.invariant][v.job] = None
    entries = []
    for invariant, found in jobs.items():
        names = [md_code(j) for j in list(found)[:MAX_JOBS_SHOWN]]
        if len(found) > MAX_JOBS_SHOWN:
            names.append(f"and {len(found) - MAX_JOBS_SHOWN} more")
        count = f"{len(found)} job{'s' if len(found) != 1 else ''}"
        entries.append(
            f"{md_code(invariant)} ({count}: {', '.join(names)})" if found else md_code(invariant)
        )
    return entries
