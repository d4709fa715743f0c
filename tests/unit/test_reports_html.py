"""Static HTML report: structure, escaping, links, assets, self-contained mode."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from html import escape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest

from harness.contract.vocabulary import INVARIANTS, Verdict
from reports import TimelineEvent, load_results, write_html
from reports.axis import build_axis, tick_step
from reports.headline import run_status
from reports.html import (
    TOKEN_MAX_CHARS,
    _asset_text,
    json_for_script,
    judged_invariants,
    token_kind,
)
from reports.kill_view import build_kill_view
from reports.matrix import build_matrix
from reports.model import Results
from reports.pages import page_stems, safe_stem
from reports.timeline import LABEL_GAP, label_width, lane_order, layout

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"
PAYLOAD_MARKERS = ("<script>window.__xss", "<img src=x", "</script><script>")
XSS_PAGE = "reset_after_commit.toxic_reset_peer.idempotent.none.sqlite.process.html"
#: The rerun's trial of the one cell run_small holds twice (key: ``<id>@<run_id>``).
VIOLATED = (
    "crash_after_external_success.after_external_call.plain.SIGKILL.sqlite.process"
    "@20261130T032000-8b1d"
)


class Collector(HTMLParser):
    """Tags, links, scripts and element ids of one page, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.icons: list[str] = []
        self.script_srcs: list[str] = []
        self.inline_scripts: list[str] = []
        self.ids: set[str] = set()
        self.handlers: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self.handlers += [k for k in values if k.startswith("on")]
        if values.get("id"):
            self.ids.add(values["id"])
        if tag in ("a", "link") and values.get("href"):
            href = values["href"] or ""
            # The favicon is an inline data: image (the run's verdict), never a file or a fetch.
            if tag == "link" and values.get("rel") == "icon":
                assert href.startswith("data:image/svg+xml,"), href
                self.icons.append(href)
            else:
                self.links.append(href)
        assert tag not in ("img", "iframe", "object", "embed"), f"unexpected <{tag}>"
        if tag == "script":
            self._in_script = True
            if values.get("src"):
                self.script_srcs.append(values["src"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline_scripts.append(data)


def parse(path: Path) -> Collector:
    c = Collector()
    c.feed(path.read_text(encoding="utf-8"))
    return c


@pytest.fixture(scope="module")
def run_small() -> Results:
    return load_results(FIXTURES / "run_small.json")


@pytest.fixture(scope="module")
def report(run_small: Results, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    write_html(run_small, out)
    return out


def all_pages(report: Path) -> list[Path]:
    return [report / "index.html", *sorted((report / "trials").glob("*.html"))]


def test_one_page_per_trial_and_every_link_resolves(report: Path, run_small: Results) -> None:
    assert len(list((report / "trials").glob("*.html"))) == run_small.summary.total
    for page in all_pages(report):
        parsed = parse(page)
        for href in parsed.links:
            assert not href.startswith(("http:", "https:", "//")), f"{page.name}: {href}"
            target, _, fragment = href.partition("#")
            if target:
                assert (page.parent / target).is_file(), f"{page.name} links to missing {href}"
            elif fragment:
                assert fragment in parsed.ids, f"{page.name}: no element #{fragment}"


def test_no_worker_text_becomes_markup(report: Path) -> None:
    for page in all_pages(report):
        parsed = parse(page)
        text = page.read_text(encoding="utf-8")
        for marker in PAYLOAD_MARKERS:
            assert marker not in text, f"{page.name} contains raw {marker!r}"
        assert parsed.handlers == [], f"{page.name} has inline event handlers"
        # Our only scripts: one hashed asset, and JSON blocks that parse as JSON.
        assert all(
            re.fullmatch(r"(\.\./)?crashpoint_[0-9a-f]{10}\.js", s) for s in parsed.script_srcs
        )
        for body in parsed.inline_scripts:
            json.loads(body)
    xss_page = report / "trials" / XSS_PAGE
    text = xss_page.read_text(encoding="utf-8")
    assert "&lt;script&gt;window.__xss = 1; alert(1)&lt;/script&gt;" in text
    assert "&#34;&gt;&lt;img src=x onerror=" in text


def test_embedded_json_survives_a_closing_script_tag(report: Path) -> None:
    page = report / "trials" / XSS_PAGE
    (data,) = parse(page).inline_scripts
    assert "</script>" in json.loads(data)["reason"]
    assert "<" not in data
    assert ">" not in data


@pytest.mark.parametrize(
    "value",
    ["</script><script>alert(1)</script>", "<!-- x", "a & b", "it's", "\u2028\u2029", {"k": "<>"}],
)
def test_json_for_script(value: object) -> None:
    text = str(json_for_script(value))
    assert not set("<>&'\u2028\u2029") & set(text)
    assert json.loads(text) == value


def test_index_counts_match_results(report: Path, run_small: Results) -> None:
    text = (report / "index.html").read_text(encoding="utf-8")
    for status, count in run_small.status_counts.items():
        assert f'data-count="{status}">{count}<' in text
    summary = run_small.summary
    for verdict in ("held", "violated", "inconclusive", "skipped"):
        assert f'data-verdict="{verdict}">{getattr(summary, verdict)}<' in text
    assert 'data-coverage="10/17"' in text
    assert "<tfoot>" in text


def test_worst_verdict_and_count_in_a_shared_cell(run_small: Results) -> None:
    matrix = build_matrix(run_small)
    row = next(r for r in matrix.rows if r.scenario == "crash_after_external_success")
    cell = next(
        c for c in row.cells if c.column.provider == "plain" and c.column.signal == "SIGKILL"
    )
    assert len(cell.trials) == 2
    assert cell.status == "violated"
    assert cell.worst is not None
    assert cell.worst.run_id == "20261130T032000-8b1d"  # the rerun, violated
    assert dict(cell.counts)["held"] == 1
    assert matrix.n_cells == 17
    assert matrix.cell_counts["held"] == 10
    assert [c.signal_label for c in matrix.columns[:4]] == [
        "SIGKILL",
        "SIGTERM",
        "SIGSTOP",
        "no signal",
    ]
    assert matrix.dimensions == ()


def test_extra_dimensions_become_columns_only_when_they_vary() -> None:
    selftest = load_results(FIXTURES / "selftest.json")
    matrix = build_matrix(selftest)
    assert matrix.dimensions == ("mutant",)
    labels = {c.label for c in matrix.columns}
    assert "idempotent · SIGKILL · correct" in labels
    assert "idempotent · SIGKILL · fresh_key_per_attempt" in labels
    # Coverage is the correct worker's; the mutants' cells are the kill matrix's.
    assert matrix.n_cells == 10
    assert matrix.covered == (3, 3)


def test_kill_matrix_page_only_for_selftest(tmp_path: Path, run_small: Results) -> None:
    selftest = load_results(FIXTURES / "selftest.json")
    write_html(selftest, tmp_path)
    kill = (tmp_path / "kill-matrix.html").read_text(encoding="utf-8")
    assert 'data-kill="killed">2<' in kill
    assert "unexpected invariant" in kill  # key_persisted_after_call: another invariant
    assert 'href="kill-matrix.html"' in (tmp_path / "index.html").read_text(encoding="utf-8")
    write_html(run_small, tmp_path)
    assert not (tmp_path / "kill-matrix.html").exists()
    assert "kill-matrix.html" not in (tmp_path / "index.html").read_text(encoding="utf-8")


def test_assets_are_content_hashed_and_stale_files_removed(
    tmp_path: Path, run_small: Results
) -> None:
    (tmp_path / "crashpoint_0123456789.css").write_text("old")
    (tmp_path / "trials").mkdir()
    (tmp_path / "trials" / "gone.html").write_text("old")
    (tmp_path / "mine.css").write_text("not ours")
    write_html(run_small, tmp_path)
    css = sorted(p.name for p in tmp_path.glob("crashpoint_*.css"))
    assert len(css) == 1
    assert css[0] != "crashpoint_0123456789.css"
    assert not (tmp_path / "trials" / "gone.html").exists()
    assert (tmp_path / "mine.css").exists()


def test_self_contained_is_one_file_with_sections(tmp_path: Path, run_small: Results) -> None:
    index = write_html(run_small, tmp_path, self_contained=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.html"]
    parsed = parse(index)
    assert parsed.script_srcs == []
    stems = page_stems(run_small.trials)
    for trial in run_small.trials:
        assert f"trial-{stems[trial.key]}" in parsed.ids
    for href in parsed.links:
        assert href.startswith("#"), href
        assert href[1:] in parsed.ids, href
    text = index.read_text(encoding="utf-8")
    # Inline CSS and JS are the packaged assets verbatim (escaping would break `&&`, `>`).
    assert _asset_text("report.css") in text
    assert _asset_text("report.js") in text
    for marker in PAYLOAD_MARKERS:
        assert marker not in text


def test_timeline_lanes_ticks_and_highlights(run_small: Results) -> None:
    trial = run_small.trial(VIOLATED)
    cited = frozenset(trial.violations[0].evidence.events)
    tl = layout(trial, cited)
    assert tl is not None
    assert [lane.source for lane in tl.lanes] == [
        "supervisor",
        "worker:w1",
        "worker:w2",
        "provider:plain",
        "ledger",
    ]
    assert {m.event.index for m in tl.marks if m.evidence} == cited
    assert len(tl.rules) == 1  # the SIGKILL
    xs = [m.x for m in sorted(tl.marks, key=lambda m: m.event.t)]
    assert xs == sorted(xs)
    assert tl.plot_left < xs[0]
    assert xs[-1] < tl.width
    assert tl.ticks[0].label == "0 ms"
    assert tl.ticks[-1].x <= tl.width
    skipped = run_small.trial("ambiguous_timeout.toxic_timeout.plain.none.sqlite.process")
    assert layout(skipped) is None


def test_timeline_labels_never_overlap_in_a_lane(run_small: Results) -> None:
    for trial in run_small.trials:
        tl = layout(trial, frozenset(i for v in trial.violations for i in v.evidence.events))
        if tl is None:
            continue
        spans: dict[tuple[str, float], list[tuple[float, float]]] = {}
        for m in tl.marks:
            if m.label:
                half = label_width(m.label, bold=m.evidence) / 2
                spans.setdefault((m.event.source, m.label_dy), []).append((m.x - half, m.x + half))
        for row in spans.values():
            row.sort()
            assert all(a[1] <= b[0] for a, b in itertools.pairwise(row))


@pytest.mark.parametrize(("span", "step"), [(0, 1), (7, 2), (1080, 200), (10020, 2000), (55, 10)])
def test_tick_step(span: float, step: float) -> None:
    assert tick_step(span) == step


def test_lane_order() -> None:
    sources = ["network", "ledger", "provider:b", "worker:w2", "zzz", "supervisor", "worker:w1"]
    assert sorted(sources, key=lane_order) == [
        "supervisor",
        "worker:w1",
        "worker:w2",
        "provider:b",
        "ledger",
        "network",
        "zzz",
    ]


def test_page_names_are_safe_and_unique(run_small: Results) -> None:
    assert safe_stem("a.b-c_d") == "a.b-c_d"
    odd = safe_stem("../../etc/passwd <x>")
    assert re.fullmatch(r"[A-Za-z0-9._-]+", odd)
    assert not odd.startswith(".")
    assert safe_stem("a/b") != safe_stem("a_b")
    assert len(safe_stem("x" * 500)) <= 130
    twins = (
        dataclasses.replace(run_small.trials[0], id="Case"),
        dataclasses.replace(run_small.trials[0], id="case"),
    )
    stems = page_stems(twins)
    assert len({s.lower() for s in stems.values()}) == 2


def test_kill_view_cells_per_scenario() -> None:
    selftest = load_results(FIXTURES / "selftest.json")
    view = build_kill_view(selftest, lambda t: f"trials/{t.id}.html")
    assert view is not None
    assert view.scenarios == (
        "crash_after_external_success",
        "crash_before_external_call",
        "lease_expiry_slow_worker",
    )
    rows = {r.mutant.name: r for r in view.rows}
    fresh = [c.status for c in rows["fresh_key_per_attempt"].cells]
    assert fresh == ["killed", "survived", "killed"]
    assert [c.status for c in rows["ack_before_effect"].cells] == ["survived", "survived", None]
    assert rows["key_persisted_after_call"].mutant.caught_as_expected is False
    assert rows["fresh_key_per_attempt"].links[0].href == (
        "trials/fresh_key_per_attempt.crash_after_external_success.after_external_call"
        ".idempotent.SIGKILL.sqlite.process.html"
    )
    assert build_kill_view(load_results(FIXTURES / "run_small.json"), str) is None


def test_a_selftest_that_stopped_a_mutant_shows_its_skipped_cells_not_run(
    tmp_path: Path,
) -> None:
    selftest = load_results(FIXTURES / "selftest.json")
    assert selftest.kill_matrix is not None
    assert selftest.kill_matrix.mode == "full"
    held = "fresh_key_per_attempt.crash_before_external_call."
    stopped = tuple(
        dataclasses.replace(t, verdict="skipped", reason="mutant already killed by x")
        if t.id.startswith(held)
        else t
        for t in selftest.trials
    )
    assert stopped != selftest.trials
    fast = dataclasses.replace(
        selftest,
        trials=stopped,
        kill_matrix=dataclasses.replace(selftest.kill_matrix, mode="until_killed"),
    )
    view = build_kill_view(fast, lambda t: t.key)
    assert view is not None
    row = next(r for r in view.rows if r.mutant.name == "fresh_key_per_attempt")
    assert [c.status for c in row.cells] == ["killed", None, "killed"]  # not "survived"
    write_html(fast, tmp_path)
    assert 'data-kill-mode="until_killed"' in (tmp_path / "kill-matrix.html").read_text("utf-8")
    write_html(selftest, tmp_path)
    assert "data-kill-mode" not in (tmp_path / "kill-matrix.html").read_text("utf-8")


def test_a_mutants_trials_land_in_their_scenarios_columns() -> None:
    # A mutant's trial id starts with the mutant (harness.plan.Cell.id), not the scenario.
    selftest = load_results(FIXTURES / "selftest.json")
    view = build_kill_view(selftest, lambda t: t.key)
    assert view is not None
    by_id = {t.id: t for t in selftest.trials}
    for row in view.rows:
        for cell in row.cells:
            assert all(by_id[lk.trial_id].scenario == cell.scenario for lk in cell.links)
        placed = [lk for c in row.cells for lk in c.links]
        assert sorted(lk.trial_id for lk in placed) == sorted(row.mutant.by)
    assert not set(view.scenarios) & {m.name for m in (selftest.kill_matrix or ()).mutants}


def test_a_killing_trial_not_in_the_results_is_listed_but_in_no_column() -> None:
    selftest = load_results(FIXTURES / "selftest.json")
    assert selftest.kill_matrix is not None
    fresh = next(m for m in selftest.kill_matrix.mutants if m.name == "fresh_key_per_attempt")
    elsewhere = fresh.by[-1]  # say, a trial of another shard's results
    assert elsewhere.startswith("fresh_key_per_attempt.lease_expiry_slow_worker.")
    partial = dataclasses.replace(
        selftest, trials=tuple(t for t in selftest.trials if t.id != elsewhere)
    )
    view = build_kill_view(partial, lambda t: t.key)
    assert view is not None
    assert "fresh_key_per_attempt" not in view.scenarios
    row = next(r for r in view.rows if r.mutant.name == "fresh_key_per_attempt")
    assert [lk.href for lk in row.links if lk.trial_id == elsewhere] == [None]
    assert all(lk.trial_id != elsewhere for c in row.cells for lk in c.links)
    lease = next(c for c in row.cells if c.scenario == "lease_expiry_slow_worker")
    assert lease.status is None  # its own trial there is not in these results either


def test_axis_without_gaps_is_linear_from_zero() -> None:
    axis = build_axis([3.0, 11.0, 24.0, 60.0], x0=100.0, x1=700.0)
    assert axis.breaks == ()
    assert axis.x(0.0) == 100.0
    assert axis.x(60.0) == 700.0  # 60 ms is a whole number of 10 ms steps
    assert axis.x(30.0) == 400.0
    assert [t.label for t in axis.ticks] == [f"{ms} ms" for ms in range(0, 70, 10)]


def test_axis_cuts_long_idle_gaps_and_stays_monotonic() -> None:
    times = [0.0, 11.0, 24.0, 32.0, 36.0, 1040.0, 1052.0, 1080.0]
    axis = build_axis(times, x0=100.0, x1=1200.0)
    assert len(axis.breaks) == 1
    assert axis.breaks[0].label.startswith("+")
    xs = [axis.x(t) for t in times]
    assert xs == sorted(xs)
    assert len(set(xs)) == len(xs)
    assert xs[0] >= 100.0
    assert xs[-1] <= 1200.0
    # Both clusters get real room: the early events span more than a tenth of the plot.
    assert xs[4] - xs[0] > 110
    assert axis.breaks[0].x > xs[4]
    assert axis.breaks[0].x < xs[5]
    ticks = [t.x for t in axis.ticks]
    assert ticks == sorted(ticks)
    assert all(100.0 <= x <= 1200.0 for x in ticks)


def test_timeline_of_violated_trial_has_a_break(run_small: Results) -> None:
    trial = run_small.trial(VIOLATED)
    tl = layout(trial)
    assert tl is not None
    assert len(tl.breaks) == 1


def test_empty_run_renders(tmp_path: Path, run_small: Results) -> None:
    index = write_html(dataclasses.replace(run_small, trials=()), tmp_path)
    text = index.read_text(encoding="utf-8")
    assert "This run has no trials" in text
    assert 'data-count="total">0<' in text


def test_axis_extends_left_for_events_before_t0() -> None:
    axis = build_axis([-4.0, 0.0, 12.0], x0=0.0, x1=600.0)
    assert axis.x(-4.0) >= 0.0
    assert axis.x(-4.0) < axis.x(0.0) < axis.x(12.0)
    assert axis.ticks[0].label.startswith("-")


def test_declared_providers_get_their_own_columns_and_the_page_says_what_was_not_judged(
    tmp_path: Path,
) -> None:
    # A command target with two providers of one kind: each is a column of its own, and
    # a trial page names the provider, how the cell was reached and what went unjudged.
    doc = json.loads((FIXTURES / "run_small.json").read_text())
    (first, *_) = doc["trials"]
    doc["trials"] = []
    for name in ("billing", "payments"):
        t = dict(first, id=f"{first['id']}-{name}", provider="idempotent", provider_name=name)
        t.update(reached_by="failpoint", unjudged={"nothing_lost": "no status command"})
        doc["trials"].append(t)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    results = load_results(path)
    labels = [c.provider for c in build_matrix(results).columns]
    assert labels == ["billing (idempotent)", "payments (idempotent)"]
    write_html(results, tmp_path / "out")
    page = next((tmp_path / "out" / "trials").glob("*payments*.html")).read_text()
    assert "payments (idempotent)" in page
    assert "failpoint: exact" in page
    assert "nothing_lost" in page
    assert "no status command" in page


def test_a_held_trial_names_every_invariant_it_judged(run_small: Results) -> None:
    held = next(t for t in run_small.trials if t.verdict == Verdict.HELD)
    assert judged_invariants(held) == tuple((i, "held") for i in INVARIANTS)
    partial = dataclasses.replace(held, extra={"unjudged": {"nothing_lost": "no status command"}})
    assert [i for i, _ in judged_invariants(partial)] == [
        i for i in INVARIANTS if i != "nothing_lost"
    ]
    violated = run_small.trial(VIOLATED)
    marks = dict(judged_invariants(violated))
    assert marks["no_duplicate_effect"] == marks["no_retry_while_unknown"] == "violated"
    assert marks["fenced_writes"] == "held"
    skipped = next(t for t in run_small.trials if t.verdict == Verdict.SKIPPED)
    assert judged_invariants(skipped) == ()


def test_the_trial_page_lists_the_judged_invariants(tmp_path: Path, run_small: Results) -> None:
    write_html(run_small, tmp_path)
    held = next(t for t in run_small.trials if t.status == "held")
    page = (tmp_path / "trials" / f"{page_stems(run_small.trials)[held.key]}.html").read_text()
    listed = re.findall(r'<li class="s-held" data-invariant="([a-z_]+)" data-judged="held">', page)
    assert listed == list(INVARIANTS)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("effect-j-0001:charge-7f3a9c2e4b", "token"),
        ("j-0001", "token"),
        ("—", "token"),
        ("", "text"),
        ("2 committed effects", "text"),
        ('{"a": 1}', "text"),
        ("e34f97b4bd8127d4fe4151e75125da383b6ca12d4fe9cb1f43a8770024c44ab8", "long"),
        ("x" * TOKEN_MAX_CHARS, "token"),
        ("x" * (TOKEN_MAX_CHARS + 1), "long"),
    ],
)
def test_token_kind(text: str, kind: str) -> None:
    assert token_kind(text) == kind


def test_evidence_keys_are_kept_whole(tmp_path: Path, run_small: Results) -> None:
    write_html(run_small, tmp_path)
    page = (tmp_path / "trials" / f"{page_stems(run_small.trials)[VIOLATED]}.html").read_text()
    assert '<td><span class="tok">m-j-0001-1</span></td>' in page
    css = _asset_text("report.css")
    data_td = next(line for line in css.splitlines() if line.startswith("table.data td {"))
    assert "anywhere" not in data_td


def test_run_status_is_the_headline_of_every_renderer(run_small: Results) -> None:
    assert run_status(run_small) == "violated"
    held = dataclasses.replace(
        run_small, trials=tuple(t for t in run_small.trials if t.status in ("held", "skipped"))
    )
    assert run_status(held) == "held"
    assert run_status(dataclasses.replace(run_small, trials=())) == "empty"
    selftest = load_results(FIXTURES / "selftest.json")
    assert run_status(selftest) == "violated", "ack_before_effect survived"


def test_the_logo_and_favicon_follow_the_run(tmp_path: Path, run_small: Results) -> None:
    held = dataclasses.replace(
        run_small, trials=tuple(t for t in run_small.trials if t.status == "held")
    )
    for results, status, glyph in ((held, "held", "✓"), (run_small, "violated", "✗")):
        out = tmp_path / status
        write_html(results, out)
        head = (out / "index.html").read_text().split("</header>", 1)[0]
        assert f'<span class="brand-mark s-{status}" data-run-status="{status}"' in head
        assert f">{glyph}</span> crashpoint" in head
        assert f'data-run-status="{status}">' in head  # the favicon's link
        parsed = parse(out / "index.html")
        assert len(parsed.icons) == 1
        assert quote(glyph) in parsed.icons[0]
    held_head = (tmp_path / "held" / "index.html").read_text().split("</header>", 1)[0]
    assert "violated" not in held_head
    assert "✗" not in held_head
    assert "✕" not in held_head


def test_label_width_is_never_less_than_drawn() -> None:
    # Measured in Chromium with DejaVu Sans at 10px: regular "commit" 37.8 px, bold 41.9.
    assert label_width("commit") == pytest.approx(37.81, abs=0.05)
    assert label_width("commit", bold=True) == pytest.approx(41.85, abs=0.05)
    assert label_width("result_write", bold=True) > label_width("result_write")
    assert label_width("ÉTAT") > 4 * 9.5, "unknown characters get the widest room"


def test_crowded_timeline_labels_never_overlap() -> None:
    kinds = ("commit", "lease_expired", "enqueue", "worker_start", "claim", "result_write")
    events = tuple(
        TimelineEvent(index=i, t=(i * 7919 % 200) / 1000.0, source="worker:w1", kind=kind)
        for i, kind in enumerate(kinds[i % len(kinds)] for i in range(80))
    )
    trial = dataclasses.replace(load_results(FIXTURES / "run_small.json").trials[0], events=events)
    cited = frozenset(range(0, 80, 2))
    tl = layout(trial, cited)
    assert tl is not None
    rows: dict[float, list[tuple[float, float]]] = {}
    for m in tl.marks:
        if m.label:
            half = label_width(m.label, bold=m.evidence) / 2
            rows.setdefault(m.label_dy, []).append((m.x - half, m.x + half))
    assert sum(len(r) for r in rows.values()) >= 10
    for row in rows.values():
        row.sort()
        assert all(b[0] - a[1] >= LABEL_GAP for a, b in itertools.pairwise(row))


def test_matrix_rows_carry_their_scenarios_story(run_small: Results) -> None:
    matrix = build_matrix(run_small)
    for row in matrix.rows:
        trial = next(t for c in row.cells for t in c.trials)
        assert row.description == trial.description
        assert row.expected == trial.expected
    selftest = build_matrix(load_results(FIXTURES / "selftest.json"))
    # The correct worker's words, not a mutant's.
    assert {r.description for r in selftest.rows} == {"selftest of the correct worker"}


def test_the_index_shows_each_scenarios_description(tmp_path: Path, run_small: Results) -> None:
    write_html(run_small, tmp_path)
    page = (tmp_path / "index.html").read_text()
    for row in build_matrix(run_small).rows:
        assert row.description
        assert f'<span class="row-desc">{escape(row.description)}</span>' in page
        assert row.expected
        assert escape(row.expected) in page
