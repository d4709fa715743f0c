"""Static HTML report: ``index.html``, one page per trial, ``kill-matrix.html`` for selftest.

Like coverage.py's report: the data is prepared first (``reports.matrix``,
``reports.timeline``), then rendered by Jinja2 templates with autoescaping on; the CSS
and JS are copied beside the pages under content-hashed names so a browser never mixes
a new page with a cached old script. Nothing is fetched from the network.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import re
import urllib.parse
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from harness.contract.vocabulary import INVARIANTS, Verdict
from harness.contract.vocabulary import VERSION as __version__
from reports.desk import review_desk, trace_of
from reports.explore_view import build_exploration
from reports.headline import RunStatus, run_status
from reports.kill_view import build_kill_view
from reports.matrix import build_matrix
from reports.model import CELL_STATUSES, SEVERITY, Results, TrialRow
from reports.pages import page_stems
from reports.timeline import GROUP_LABELS, KIND_GROUPS, OUTCOME_LABELS, layout

ASSET_PREFIX = "crashpoint_"
TRIALS_DIR = "trials"
#: The review desk: every job of the run that ended in needs_review.
REVIEW_PAGE = "review.html"

GLYPHS: Mapping[str, str] = {
    "held": "✓",
    "violated": "✗",
    "not_reached": "○",
    "inconclusive": "?",
    "skipped": "\u2013",  # en dash: a visible "not run" mark, distinct from hyphens
}
LABELS: Mapping[str, str] = {
    "held": "held",
    "violated": "violated",
    "not_reached": "not reached",
    "inconclusive": "inconclusive",
    "skipped": "skipped",
}
#: The run's verdict beside the logo and in the favicon: glyph, words, colour (light theme).
RUN_MARKS: Mapping[RunStatus, tuple[str, str, str]] = {
    "held": (GLYPHS["held"], "every trial held", "#1a7f37"),
    "violated": (GLYPHS["violated"], "violated", "#c62828"),
    "not_reached": (GLYPHS["not_reached"], "not every injection reached", "#8a5a00"),
    "inconclusive": (GLYPHS["inconclusive"], "inconclusive", "#6b3fb5"),
    "skipped": (GLYPHS["skipped"], "skipped", "#55606b"),
    "empty": ("?", "no trials ran", "#55606b"),
}
_ASSETS = ("report.css", "report.js")
#: The exploration's page beside index.html (written only for an exploration run).
EXPLORE_PAGE = "exploration.html"
_OWNED_ASSET = re.compile(rf"^{ASSET_PREFIX}[0-9a-f]{{10}}\.(css|js)$")


def write_html(
    results: Results,
    out_dir: str | Path,
    *,
    self_contained: bool = False,
    generated_at: dt.datetime | None = None,
) -> Path:
    """Render the report into ``out_dir``; return the path of ``index.html``.

    ``self_contained=True`` writes one ``index.html`` with the CSS and JS inline and
    every trial as an in-page section, for attaching to a CI run as a single file.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stems = page_stems(results.trials)
    when = (generated_at or dt.datetime.now(dt.UTC)).replace(microsecond=0)
    common: dict[str, Any] = {
        "results": results,
        "summary": results.summary,
        "matrix": build_matrix(results),
        "statuses": CELL_STATUSES,
        "glyphs": GLYPHS,
        "labels": LABELS,
        "group_labels": GROUP_LABELS,
        "outcome_labels": OUTCOME_LABELS,
        "generated_at": when.isoformat().replace("+00:00", "Z"),
        "version": __version__,
        "self_contained": self_contained,
        "stems": stems,
        "index_data": _index_data(results),
        "desk": review_desk(results),
        "run_mark": _run_mark(run_status(results)),
    }
    env = _environment()
    index = out / "index.html"
    if self_contained:
        assets = {name: _inline_asset(name) for name in _ASSETS}
        common["kill"] = build_kill_view(results, lambda t: f"#trial-{stems[t.key]}")
        common["exploration"] = build_exploration(results, lambda t: f"#trial-{stems[t.key]}")
        html = env.get_template("single.html.j2").render(
            common,
            root="",
            inline_css=assets["report.css"],
            inline_js=assets["report.js"],
            link=lambda t: f"#trial-{stems[t.key]}",
            event_href=lambda t, i: f"#{stems[t.key]}-ev-{i}",
            kill_href="#kill-matrix",
            review_href="#review-desk",
            explore_href="#exploration",
            index_href="#top",
            trial_view=lambda t: _trial_view(t, results.run_id),
        )
        _write(index, html)
        return index

    names = _copy_assets(out)

    def page_link(t: TrialRow) -> str:
        return f"{TRIALS_DIR}/{stems[t.key]}.html"

    def event_link(t: TrialRow, i: int) -> str:
        return f"{page_link(t)}#{stems[t.key]}-ev-{i}"

    common["kill"] = build_kill_view(results, page_link)
    common["review_href"] = REVIEW_PAGE
    common["exploration"] = build_exploration(results, page_link)

    def top_page(template: str, path: Path, *, wanted: bool = True) -> None:
        """A page beside index.html, or (not wanted) a stale one of an earlier run removed."""
        if not wanted:
            path.unlink(missing_ok=True)
            return
        html = env.get_template(template).render(
            common,
            root="",
            css=names["report.css"],
            js=names["report.js"],
            link=page_link,
            event_href=event_link,
            kill_href="kill-matrix.html",
            explore_href=EXPLORE_PAGE,
            index_href="index.html",
        )
        _write(path, html)

    top_page("index.html.j2", index)
    top_page("review.html.j2", out / REVIEW_PAGE)
    top_page(
        "kill_matrix.html.j2", out / "kill-matrix.html", wanted=results.kill_matrix is not None
    )
    top_page("exploration.html.j2", out / EXPLORE_PAGE, wanted=common["exploration"] is not None)
    trials_dir = out / TRIALS_DIR
    trials_dir.mkdir(exist_ok=True)
    trial_tpl = env.get_template("trial.html.j2")
    written = set()
    for trial in results.trials:
        name = f"{stems[trial.key]}.html"
        written.add(name)
        _write(
            trials_dir / name,
            trial_tpl.render(
                common,
                root="../",
                css=names["report.css"],
                js=names["report.js"],
                link=lambda t: f"{stems[t.key]}.html",
                kill_href="../kill-matrix.html",
                explore_href=f"../{EXPLORE_PAGE}",
                index_href="../index.html",
                review_href=f"../{REVIEW_PAGE}",
                trial=_trial_view(trial, results.run_id),
            ),
        )
    # Pages of an earlier run into the same directory would otherwise linger as
    # reachable-looking but stale files.
    for old in trials_dir.glob("*.html"):
        if old.name not in written:
            old.unlink()
    return index


def json_for_script(value: object) -> Markup:
    """JSON safe inside ``<script>``: ``<``, ``>``, ``&``, quotes and line separators are
    \\u-escaped, so a string holding ``</script>`` or ``<!--`` cannot end the element."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("'", "\\u0027"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return Markup(text)  # noqa: S704 - every markup-significant character is escaped above


def _run_mark(status: RunStatus) -> dict[str, str]:
    glyph, words, colour = RUN_MARKS[status]
    return {"status": status, "glyph": glyph, "words": words, "favicon": favicon(glyph, colour)}


def favicon(glyph: str, colour: str) -> str:
    """A ``data:`` SVG icon: the run's glyph in white on its verdict's colour (no file to
    copy, nothing fetched)."""
    svg = (
        "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'>"
        f"<circle cx='8' cy='8' r='8' fill='{colour}'/>"
        "<text x='8' y='12.5' font-size='12' font-weight='700' text-anchor='middle' "
        f"font-family='sans-serif' fill='#fff'>{glyph}</text></svg>"
    )
    return "data:image/svg+xml," + urllib.parse.quote(svg)


def _trial_view(trial: TrialRow, run_id: str) -> dict[str, Any]:
    highlighted = frozenset(i for v in trial.violations for i in v.evidence.events)
    return {
        "t": trial,
        "trace": trace_of(trial, run_id),
        "timeline": layout(trial, highlighted),
        "highlighted": highlighted,
        "judged": judged_invariants(trial),
        "data": {"id": trial.id, "replay": trial.replay, "reason": trial.reason},
    }


def judged_invariants(trial: TrialRow) -> tuple[tuple[str, str], ...]:
    """(invariant, "held" | "violated") for each invariant the oracle judged in ``trial``:
    every known invariant but the unjudged ones, then any other one it found violated.
    Empty when nothing was judged (a skipped or inconclusive trial)."""
    if trial.verdict not in (Verdict.HELD, Verdict.VIOLATED):
        return ()
    violated = {v.invariant for v in trial.violations}
    names = [i for i in INVARIANTS if i not in trial.unjudged]
    names += sorted(violated - set(names))
    return tuple((i, "violated" if i in violated else "held") for i in names)


def _index_data(results: Results) -> dict[str, Any]:
    s = results.summary
    return {
        "run_id": results.run_id,
        "summary": {
            "total": s.total,
            "held": s.held,
            "violated": s.violated,
            "inconclusive": s.inconclusive,
            "skipped": s.skipped,
            "not_reached": s.not_reached,
        },
    }


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        # Always on, whatever the template's extension: every page shows worker text.
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["script_json"] = json_for_script
    env.filters["cellvalue"] = _cell_value
    env.filters["token_kind"] = token_kind
    env.filters["seconds"] = _seconds
    env.filters["ms"] = lambda t: f"{t * 1000.0:.1f}"
    env.filters["severity"] = lambda status: SEVERITY[status]
    env.filters["kind_group"] = lambda kind: KIND_GROUPS.get(kind, "note")
    env.globals["columns_of"] = _columns_of
    return env


def _columns_of(rows: tuple[Mapping[str, Any], ...]) -> list[str]:
    """Union of the rows' keys, in first-seen order (rows of one table may differ)."""
    return list(dict.fromkeys(k for row in rows for k in row))


def _cell_value(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


#: Longest id or key kept on one line; a longer unbroken string (a digest) may wrap.
TOKEN_MAX_CHARS = 40


def token_kind(text: str) -> str:
    """How a table value may wrap: ``text`` (at its spaces), ``token`` (an id or key with
    no spaces: never split, its table scrolls instead) or ``long`` (an unbroken string
    longer than TOKEN_MAX_CHARS, such as a digest: may break anywhere)."""
    if not text or any(ch.isspace() for ch in text):
        return "text"
    return "token" if len(text) <= TOKEN_MAX_CHARS else "long"


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


@functools.cache
def _asset_text(name: str) -> str:
    return resources.files("reports").joinpath("assets", name).read_text(encoding="utf-8")


def _inline_asset(name: str) -> Markup:
    """Our own CSS/JS for a ``<style>``/``<script>`` element: trusted code, not data, so it
    is not escaped (escaping would turn ``&&`` into ``&amp;&amp;``). It must never contain
    the closing tag of the element it goes into."""
    text = _asset_text(name)
    if re.search(r"</(script|style)", text, re.IGNORECASE):
        raise ValueError(f"reports/assets/{name} contains a closing </script> or </style>")
    return Markup(text)  # noqa: S704 - a packaged asset, checked above


def _copy_assets(out: Path) -> dict[str, str]:
    names = {}
    for name in _ASSETS:
        text = _asset_text(name)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]
        ext = name.rsplit(".", 1)[1]
        hashed = f"{ASSET_PREFIX}{digest}.{ext}"
        names[name] = hashed
        target = out / hashed
        if not target.exists():
            target.write_text(text, encoding="utf-8")
    for old in out.iterdir():
        if _OWNED_ASSET.match(old.name) and old.name not in names.values():
            old.unlink()
    return names


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
