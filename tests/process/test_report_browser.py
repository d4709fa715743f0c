"""The HTML report in a real headless Chromium over file://: counts, filter, hide held,
keyboard, navigation to a trial, the timeline, the review desk of a real run, and proof
that no worker script runs."""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import clikit
import pytest

from harness.contract.vocabulary import INVARIANTS, Verdict
from harness.pytest_plugin import missing
from reports import build_report, load_results
from reports.matrix import build_matrix
from reports.model import Results, TrialRow
from reports.pages import page_stems

pytestmark = [pytest.mark.process, pytest.mark.browser, pytest.mark.timeout(120)]

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
XSS_PAGE = "trials/reset_after_commit.toxic_reset_peer.idempotent.none.sqlite.process.html"


@dataclass
class Watch:
    """Everything a page did that a static report never should."""

    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Results]:
    out = tmp_path_factory.mktemp("report")
    results = build_report([FIXTURES / "run_small.json"], out)
    return out, results


@pytest.fixture(scope="module")
def context(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not os.access(CHROMIUM, os.X_OK):
        missing(pytestconfig, f"chromium at {CHROMIUM}; apt-get install chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=CHROMIUM,
            headless=True,
            args=ARGS,
            viewport={"width": 1360, "height": 900},
        )
        try:
            yield ctx
        finally:
            ctx.close()


@pytest.fixture
def page(context: Any) -> Iterator[tuple[Any, Watch]]:
    watch = Watch()
    pg = context.new_page()

    def on_dialog(dialog: Any) -> None:
        watch.dialogs.append(dialog.message)
        dialog.dismiss()

    def on_request(request: Any) -> None:
        if not request.url.startswith("file://"):
            watch.requests.append(request.url)

    pg.on("dialog", on_dialog)
    pg.on("pageerror", lambda exc: watch.errors.append(str(exc)))
    pg.on("console", lambda msg: watch.errors.append(msg.text) if msg.type == "error" else None)
    pg.on("request", on_request)
    yield pg, watch
    pg.close()
    assert watch.dialogs == [], "a dialog opened: worker text ran as script"
    assert watch.errors == [], "the page logged errors"
    assert watch.requests == [], "the report fetched something over the network"


def visible_rows(pg: Any, table: str) -> int:
    return int(pg.locator(f"#{table} tbody tr:not(.hidden)").count())


def test_index_counts_filter_hide_held_and_keyboard(
    page: tuple[Any, Watch], report: tuple[Path, Results], tmp_path: Path
) -> None:
    pg, _ = page
    out, results = report
    pg.goto((out / "index.html").as_uri())
    for status, count in results.status_counts.items():
        assert pg.locator(f'[data-count="{status}"]').inner_text() == str(count)
    for verdict in ("held", "violated", "inconclusive", "skipped"):
        shown = pg.locator(f'[data-verdict="{verdict}"]').inner_text()
        assert shown == str(getattr(results.summary, verdict))
    matrix = build_matrix(results)
    for status, count in matrix.cell_counts.items():
        assert pg.locator(f"#matrix tbody td.cell[data-status='{status}']").count() == count
        if count:
            assert pg.locator(f'tfoot [data-cells="{status}"]').inner_text() == str(count)
    assert pg.locator("#trial-list tbody tr").count() == results.summary.total
    pg.screenshot(path=str(tmp_path / "index.png"), full_page=True)

    # "/" focuses the filter; the filter narrows both tables.
    pg.keyboard.press("/")
    assert pg.evaluate("document.activeElement.id") == "filter"
    pg.keyboard.type("lease_expiry")
    assert visible_rows(pg, "matrix") == 1
    assert visible_rows(pg, "trial-list") == 2
    pg.fill("#filter", "")
    assert visible_rows(pg, "matrix") == len(matrix.rows)

    # Hide held: no row whose worst status is held stays, nor any held trial.
    pg.check("#hide-held")
    held_rows = sum(1 for r in matrix.rows if r.status == "held")
    assert visible_rows(pg, "matrix") == len(matrix.rows) - held_rows
    assert pg.locator("#matrix tbody tr:not(.hidden)[data-status='held']").count() == 0
    assert visible_rows(pg, "trial-list") == results.summary.total - results.status_counts["held"]
    pg.uncheck("#hide-held")

    # Sorting a matrix column puts its worst cell first; the row header sorts back.
    worst_col = next(
        i
        for i, col in enumerate(matrix.columns)
        if any(r.cells[i].status == "violated" for r in matrix.rows)
    )
    pg.click(f"#matrix thead button[data-col='{worst_col + 1}']")
    first_row = pg.locator("#matrix tbody tr").first
    assert first_row.locator("td").nth(worst_col).get_attribute("data-status") == "violated"
    pg.click("#matrix thead button[data-col='0']")
    assert pg.locator("#matrix tbody tr th .scenario").first.inner_text() == matrix.rows[0].scenario

    # Sorting the trial list by status puts the worst first.
    pg.click("#trial-list thead button[data-col='0']")
    assert pg.locator("#trial-list tbody tr").first.get_attribute("data-status") == "violated"

    # Keyboard: Escape leaves the filter, j enters the grid, l moves right, Enter opens.
    pg.keyboard.press("Escape")
    pg.keyboard.press("j")
    first = pg.evaluate("document.activeElement.closest('td') && document.activeElement.href")
    assert first
    assert first.endswith(".html")
    pg.keyboard.press("l")
    second = pg.evaluate("document.activeElement.href")
    assert second != first
    pg.keyboard.press("Enter")
    pg.wait_for_url(second)

    # Theme toggle switches the palette and is remembered.
    pg.goto((out / "index.html").as_uri())
    before = pg.evaluate("getComputedStyle(document.body).backgroundColor")
    pg.click("#theme-toggle")
    after = pg.evaluate("getComputedStyle(document.body).backgroundColor")
    assert before != after


def test_violated_cell_opens_trial_with_timeline(
    page: tuple[Any, Watch], report: tuple[Path, Results], tmp_path: Path
) -> None:
    pg, _ = page
    out, _results = report
    pg.goto((out / "index.html").as_uri())
    cell = pg.locator("#matrix td.cell[data-status='violated'] a").first
    assert "violated" in (cell.get_attribute("title") or "")
    cell.click()
    pg.wait_for_load_state()
    assert "/trials/" in pg.url
    assert pg.locator("h1 .badge.s-violated").count() == 1
    svg = pg.locator("svg.timeline")
    assert svg.count() == 1
    lanes = pg.locator("svg.timeline .lane-label").all_text_contents()
    assert "supervisor" in lanes
    assert "worker:w1" in lanes
    assert len(lanes) >= 4
    assert pg.locator("svg.timeline a.mark.evidence").count() >= 1
    assert pg.locator("table.events tr.evidence").count() >= 1
    assert pg.locator(".violation").count() >= 1
    pg.screenshot(path=str(tmp_path / "trial.png"), full_page=True)


def test_worker_payloads_never_run(page: tuple[Any, Watch], report: tuple[Path, Results]) -> None:
    pg, _ = page
    out, _ = report
    for target in (out / XSS_PAGE, out / "index.html"):
        pg.goto(target.as_uri())
        pg.wait_for_load_state("load")
        assert pg.evaluate("typeof window.__xss") == "undefined"
    # The payload is on the page as text, where the reader can see it.
    pg.goto((out / XSS_PAGE).as_uri())
    assert "<script>window.__xss = 1; alert(1)</script>" in pg.inner_text(".violation")
    assert pg.locator(".violation img").count() == 0
    # Hovering every mark (its <title>) and copying the replay command runs nothing.
    pg.locator("svg.timeline a.mark").last.hover()
    pg.click("button.copy")
    assert pg.evaluate("typeof window.__xss") == "undefined"


def test_self_contained_file_navigates_in_page(page: tuple[Any, Watch], tmp_path: Path) -> None:
    pg, _ = page
    results = load_results(FIXTURES / "run_small.json")
    index = build_report([FIXTURES / "run_small.json"], tmp_path, self_contained=True)
    assert index.summary == results.summary
    pg.goto((tmp_path / "index.html").as_uri())
    assert pg.locator(".trial-section:visible").count() == 0
    pg.locator("#matrix td.cell[data-status='violated'] a").first.click()
    assert pg.locator(".trial-section:visible").count() == 1
    assert pg.locator(".index-view").is_hidden()
    assert pg.locator(".trial-section:visible svg.timeline").count() == 1
    assert pg.evaluate("typeof window.__xss") == "undefined"


def test_selftest_kill_matrix_page(page: tuple[Any, Watch], tmp_path: Path) -> None:
    pg, _ = page
    results = build_report([FIXTURES / "selftest.json"], tmp_path)
    assert results.kill_matrix is not None
    pg.goto((tmp_path / "index.html").as_uri())
    pg.click("text=Open the kill matrix")
    pg.wait_for_url("**/kill-matrix.html")
    assert pg.locator('[data-kill="killed"]').inner_text() == str(results.kill_matrix.killed)
    rows = pg.locator("#kill-table tbody tr")
    assert rows.count() == len(results.kill_matrix.mutants)
    assert pg.locator("#kill-table tbody tr[data-status='survived']").count() == 1
    pg.locator("#kill-table td[data-kill-cell='killed'] a").first.click()
    pg.wait_for_load_state()
    assert "/trials/" in pg.url
    assert pg.locator("h1 .badge.s-violated").count() == 1


@pytest.fixture(scope="module")
def review_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A real run whose unqueryable cells leave needs_review jobs (the correct worker
    cannot reconcile a crashed write there, so the job goes to a person)."""
    scratch = Path(tempfile.mkdtemp(prefix="cpn-"))
    out = tmp_path_factory.mktemp("review-run")
    try:
        done = clikit.run(
            [
                "--scenario",
                "crash_after_external_success",
                "--scenario",
                "crash_during_external_call",
                "--provider",
                "unqueryable",
                "--provider",
                "plain",
                "--signal",
                "SIGKILL",
                "--seed",
                "11",
                "--out",
                str(out),
            ],
            scratch,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return out, clikit.results(out)


def _review_jobs(doc: dict[str, Any]) -> set[tuple[str, str]]:
    """(trial, job) of every job whose last accepted ledger write sent it to review: read
    from the events, not from the review rows the page is drawn from."""
    found = set()
    for t in doc["trials"]:
        last: dict[str, str] = {}
        for e in t["events"]:
            if e["kind"] == "result_write" and e["fields"].get("accepted"):
                last[e["job"]] = e["fields"]["wrote"]
        found |= {(t["id"], job) for job, wrote in last.items() if wrote == "needs_review"}
    return found


def test_review_desk_lists_every_needs_review_job_with_its_evidence(
    page: tuple[Any, Watch], review_run: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    pg, _ = page
    out, doc = review_run
    wanted = _review_jobs(doc)
    assert wanted, "the unqueryable cells left no job in needs_review"
    assert doc["summary"]["needs_review"] == len(wanted)
    pg.goto((out / "index.html").as_uri())
    assert pg.locator("[data-review]").inner_text() == str(len(wanted))
    pg.click("text=Open the review desk")
    pg.wait_for_url("**/review.html")
    pg.screenshot(path=str(tmp_path / "review.png"), full_page=True)
    assert pg.locator("[data-review-count]").inner_text() == str(len(wanted))
    entries = pg.locator("article.review-job")
    assert entries.count() == len(wanted)
    shown = set()
    trials = {t["id"]: t for t in doc["trials"]}
    for i in range(entries.count()):
        entry = entries.nth(i)
        trial_id, job = entry.get_attribute("data-trial"), entry.get_attribute("data-job")
        assert trial_id is not None
        assert job is not None
        shown.add((trial_id, job))
        trial = trials[trial_id]
        writes = [e for e in trial["events"] if e["kind"] == "arrival" and e["job"] == job]
        last = writes[-1]["fields"]

        def evidence(name: str, entry: Any = entry) -> str:
            text: str = entry.locator(f'[data-evidence="{name}"] dd').inner_text()
            return text

        # 1. the key the job's writes carried (the ledger's key; the marker at plain ones)
        assert (last["idempotency_key"] or last["client_marker"]) in evidence("key")
        assert f"effect-{job}" in evidence("key")
        # 2. the attempted action: the job's last write
        assert f"{last['method']} {last['path']} at {last['provider']}" in evidence("action")
        # 3. its time, as the provider's UTC wall clock, linked into the timeline
        stamp = entry.locator('[data-evidence="time"] time').get_attribute("datetime")
        assert stamp is not None
        assert dt.datetime.fromisoformat(stamp).timestamp() == pytest.approx(
            last["t_wall"], abs=0.001
        )
        # 4. the last error, and why the job went to review
        assert evidence("last_error").strip()
        assert "unqueryable" in evidence("last_error")
        # 5. the last known external state: the provider could not be asked
        assert "501" in evidence("external_state")
        # ... and the records the provider really holds for it (none when the held
        # request was dropped before commit).
        records = [
            e["fields"]["external_id"]
            for e in trial["events"]
            if e["kind"] == "commit" and e["job"] == job
        ]
        for record in records:
            assert record in evidence("external_state")
        if not records:
            assert evidence("external_state").endswith("provider records for the job: none")
    assert shown == wanted

    # The time links to the write's row in the trial's timeline, on the trial's page.
    link = entries.first.locator('[data-evidence="time"] a.ev-ref')
    target = link.get_attribute("href")
    assert target is not None
    job = entries.first.get_attribute("data-job")
    link.click()
    pg.wait_for_load_state()
    assert "/trials/" in pg.url
    row = pg.locator(f"tr[id='{target.split('#', 1)[1]}']")
    assert row.count() == 1
    cells = row.locator("td").all_inner_texts()
    assert cells[3].startswith("arrival")
    assert cells[4] == job
    # That page's traceability table has one row per committed effect.
    commits = pg.locator("table.events td span.kind", has_text="commit").count()
    assert pg.locator("table.trace-table tbody tr").count() == commits
    assert commits >= 1


# Layout at three widths: a phone, a laptop, a wide monitor. Geometry is read from the
# page (getBoundingClientRect), never judged from a screenshot by eye.
WIDTHS = (375, 1400, 2560)
#: A key as a real ledger writes it: hyphens a browser would otherwise break a line at.
IDEMPOTENCY_KEY = "effect-j-0001:charge-7f3a9c2e4b"
#: The scenarios of a full selftest: enough columns to make the kill matrix wider than
#: a laptop screen.
SELFTEST_SCENARIOS = (
    "crash_before_external_call",
    "crash_during_external_call",
    "crash_after_external_success",
    "duplicate_delivery",
    "lease_expiry_slow_worker",
    "state_store_restore",
    "provider_error_before_commit",
    "simultaneous_trigger",
    "ambiguous_timeout",
    "reset_after_commit",
    "provider_down_during_reconcile",
    "relay_crash_after_send",
    "clock_skew",
    "identity_lost_on_recovery",
    "multi_step_job",
    "lost_acknowledgement",
    "key_retention",
)
#: Event kinds of every width, for timelines crowded enough to collide labels.
CROWD_KINDS = (
    "commit",
    "arrival",
    "claim",
    "result_write",
    "worker_start",
    "lease_expired",
    "reconcile",
    "hold",
    "release",
    "failpoint",
    "control_denied",
    "toxic_on",
    "worker_exit",
    "enqueue",
    "signal",
)
#: Seeds whose crowded timelines overlapped labels with a 5.8 px-a-character estimate.
CROWD_SEEDS = (9, 25, 31)
PAGE_FITS = "document.documentElement.scrollWidth <= window.innerWidth + 1"


def _doc(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return doc


def _build(doc: dict[str, Any], out: Path) -> Results:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "input.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return build_report([path], out / "report")


def _crowded_trial(base: dict[str, Any], seed: int) -> dict[str, Any]:
    """``base`` with a timeline of 20 to 80 events in one lane at random times, each
    violation citing about half of them as evidence (their labels are bold, so wider)."""
    rnd = random.Random(seed)
    n = rnd.choice([20, 40, 80])
    events: list[dict[str, Any]] = []
    for _ in range(n):
        t = round(rnd.uniform(0, 0.2), 5)
        kind = rnd.choice(CROWD_KINDS)
        events.append(
            {
                "t": t,
                "source": "worker:w1",
                "kind": kind,
                "job": None,
                "attempt": None,
                "fields": {},
            }
        )
    events.sort(key=lambda e: e["t"])
    trial = copy.deepcopy(base)
    trial.update(id=f"{base['id']}-crowd{seed}", events=events, trace=[])
    for v in trial["violations"]:
        v["evidence"]["events"] = [i for i in range(n) if rnd.random() < 0.5]
    return trial


@pytest.fixture(scope="module")
def layout_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Results]:
    """run_small with a realistic idempotency key in a violation's evidence, a held trial
    that could not judge one invariant, and crowded timelines."""
    doc = _doc("run_small.json")
    violated = next(t for t in doc["trials"] if t["violations"] and t["events"])
    for row in violated["violations"][0]["evidence"]["arrivals"]:
        row["idempotency_key"] = IDEMPOTENCY_KEY
    held = next(t for t in doc["trials"] if t["verdict"] == "held" and t["reached"])
    held["unjudged"] = {"nothing_lost": "no status command"}
    doc["trials"] += [_crowded_trial(violated, seed) for seed in CROWD_SEEDS]
    out = tmp_path_factory.mktemp("layout-run")
    results = _build(doc, out)
    return out / "report", results


@pytest.fixture(scope="module")
def wide_selftest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The selftest fixture with the correct worker run in every scenario of a full
    selftest: a kill matrix of 17 scenario columns."""
    doc = _doc("selftest.json")
    correct = doc["trials"][0]
    for scenario in SELFTEST_SCENARIOS:
        if any(t["scenario"] == scenario for t in doc["trials"]):
            continue
        trial = copy.deepcopy(correct)
        trial.update(id=correct["id"].replace(correct["scenario"], scenario), scenario=scenario)
        doc["trials"].append(trial)
    out = tmp_path_factory.mktemp("wide-selftest")
    _build(doc, out)
    return out / "report"


def _open(pg: Any, path: Path, width: int) -> None:
    pg.set_viewport_size({"width": width, "height": 900})
    pg.goto(path.as_uri())
    pg.wait_for_load_state("load")


def _page_of(out: Path, results: Results, trial: TrialRow) -> Path:
    return out / "trials" / f"{page_stems(results.trials)[trial.key]}.html"


@pytest.mark.parametrize("width", WIDTHS)
def test_every_kill_matrix_column_is_reachable(
    page: tuple[Any, Watch], wide_selftest: Path, width: int
) -> None:
    pg, _ = page
    _open(pg, wide_selftest / "kill-matrix.html", width)
    geometry = pg.evaluate(
        """() => {
        const wrap = document.querySelector("#kill-table").closest(".table-wrap");
        const box = wrap.getBoundingClientRect();
        const heads = [...document.querySelectorAll("#kill-table thead th")];
        const rights = heads.map(
            th => th.getBoundingClientRect().right - box.left + wrap.scrollLeft);
        const natural = document.querySelector("#kill-table").scrollWidth;
        wrap.scrollLeft = wrap.scrollWidth;
        const last = heads[heads.length - 1].getBoundingClientRect();
        return {rights, natural, scrollWidth: wrap.scrollWidth, clientWidth: wrap.clientWidth,
                left: box.left, right: box.right, lastLeft: last.left, lastRight: last.right,
                labels: heads.map(th => th.textContent.trim()),
                fits: document.documentElement.scrollWidth <= innerWidth + 1};
    }"""
    )
    assert geometry["labels"][-3:] == ["expected invariant", "caught by", "killing trials"]
    assert {*SELFTEST_SCENARIOS} <= {*geometry["labels"]}
    # Wider than a 1320 px column of text: the case the report used to clip.
    assert geometry["natural"] > 1400
    assert all(r <= geometry["scrollWidth"] + 1 for r in geometry["rights"])
    # Scrolled to its end, the last column is inside the box: every column is reachable.
    assert geometry["left"] - 1 <= geometry["lastLeft"]
    assert geometry["lastRight"] <= geometry["right"] + 1
    # The box scrolls, never the page.
    assert geometry["left"] >= 0
    assert geometry["right"] <= width + 1
    assert geometry["fits"], "the page itself scrolls sideways"
    if geometry["natural"] <= width - 64:
        # A wide window shows the whole table: no fixed max-width makes it scroll.
        assert geometry["scrollWidth"] <= geometry["clientWidth"] + 1


@pytest.mark.parametrize("width", WIDTHS)
def test_evidence_keys_stay_whole_and_the_trial_page_fits(
    page: tuple[Any, Watch], layout_run: tuple[Path, Results], width: int
) -> None:
    pg, _ = page
    out, results = layout_run
    trial = next(t for t in results.trials if t.violations and t.events)
    _open(pg, _page_of(out, results, trial), width)
    lines = pg.evaluate(
        """(key) => [...document.querySelectorAll("table.data td")]
            .filter(td => td.textContent.trim() === key)
            .map(td => {
                const range = document.createRange();
                range.selectNodeContents(td);
                return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
            })""",
        IDEMPOTENCY_KEY,
    )
    assert lines, "the key is not in an evidence table"
    assert lines == [1] * len(lines), f"the key is split across lines: {lines}"
    assert pg.evaluate(PAGE_FITS), "the trial page scrolls sideways"


@pytest.mark.parametrize("width", WIDTHS)
def test_theme_toggle_stays_on_screen(
    page: tuple[Any, Watch], layout_run: tuple[Path, Results], wide_selftest: Path, width: int
) -> None:
    pg, _ = page
    out, _ = layout_run
    for path in (out / "index.html", wide_selftest / "kill-matrix.html", out / "review.html"):
        _open(pg, path, width)
        box = pg.evaluate(
            """() => {
            const t = document.getElementById("theme-toggle");
            const r = t.getBoundingClientRect();
            const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
            return {left: r.left, right: r.right, top: r.top, bottom: r.bottom,
                    onTop: t.contains(hit), w: innerWidth};
        }"""
        )
        assert 0 <= box["left"] < box["right"] <= box["w"], f"{path.name}: {box}"
        assert box["onTop"], f"{path.name}: the toggle is covered"
        assert pg.evaluate(PAGE_FITS), f"{path.name} scrolls sideways at {width} px"
    before = pg.evaluate("getComputedStyle(document.body).backgroundColor")
    pg.click("#theme-toggle")
    assert pg.evaluate("getComputedStyle(document.body).backgroundColor") != before


@pytest.mark.parametrize("width", WIDTHS)
def test_the_logo_shows_the_runs_verdict(
    page: tuple[Any, Watch],
    report: tuple[Path, Results],
    tmp_path: Path,
    width: int,
) -> None:
    pg, _ = page
    doc = _doc("run_small.json")
    doc["trials"] = [t for t in doc["trials"] if t["verdict"] == "held" and t["reached"]]
    held_out = tmp_path / "held"
    held = _build(doc, held_out)
    assert held.status_counts["held"] == held.summary.total > 0
    header = """() => {
        const bar = document.querySelector("header.topbar");
        const red = '[class*="violated"], [data-run-status="violated"]';
        return {violated: bar.querySelectorAll(red).length,
                crosses: /[\u2717\u2715\u00d7\u274c]/.test(bar.textContent),
                brand: document.querySelector(".brand-mark").dataset.runStatus,
                icon: document.querySelector('link[rel="icon"]').dataset.runStatus,
                colour: getComputedStyle(document.querySelector(".brand-mark")).color};
    }"""
    _open(pg, held_out / "report" / "index.html", width)
    green = pg.evaluate(header)
    assert green["violated"] == 0
    assert not green["crosses"]
    assert green["brand"] == green["icon"] == "held"
    # The violated run beside it: the same header says so, in another colour.
    out, _ = report
    _open(pg, out / "index.html", width)
    red = pg.evaluate(header)
    assert red["brand"] == red["icon"] == "violated"
    assert red["crosses"]
    assert red["colour"] != green["colour"]


@pytest.mark.parametrize("width", WIDTHS)
def test_a_held_trial_lists_the_invariants_it_judged(
    page: tuple[Any, Watch], layout_run: tuple[Path, Results], width: int
) -> None:
    pg, _ = page
    out, results = layout_run
    trial = next(t for t in results.trials if t.unjudged and t.verdict == Verdict.HELD)
    _open(pg, _page_of(out, results, trial), width)
    judged = pg.locator("ul.judged li")
    names = [judged.nth(i).get_attribute("data-invariant") for i in range(judged.count())]
    assert names == [i for i in INVARIANTS if i != "nothing_lost"]
    assert pg.locator("ul.judged li[data-judged='held']").count() == len(names)
    assert judged.first.is_visible()
    assert pg.evaluate(PAGE_FITS)


@pytest.mark.parametrize("width", WIDTHS)
def test_timeline_labels_of_close_events_do_not_overlap(
    page: tuple[Any, Watch], layout_run: tuple[Path, Results], width: int
) -> None:
    pg, _ = page
    out, results = layout_run
    crowded = [t for t in results.trials if "-crowd" in t.id]
    assert len(crowded) == len(CROWD_SEEDS)
    for trial in crowded:
        _open(pg, _page_of(out, results, trial), width)
        found = pg.evaluate(
            """() => {
            const boxes = [...document.querySelectorAll("svg.timeline a.mark")]
                .filter(a => a.querySelector("text.mark-label"))
                .map(a => ({lane: a.transform.baseVal.consolidate().matrix.f,
                            text: a.querySelector("text.mark-label").textContent,
                            r: a.querySelector("text.mark-label").getBoundingClientRect()}));
            const hits = [];
            for (let i = 0; i < boxes.length; i++) {
                for (let j = i + 1; j < boxes.length; j++) {
                    const a = boxes[i], b = boxes[j];
                    if (a.lane === b.lane && a.r.left < b.r.right && b.r.left < a.r.right
                            && a.r.top < b.r.bottom && b.r.top < a.r.bottom) {
                        hits.push(a.text + " / " + b.text);
                    }
                }
            }
            return {labels: boxes.length, hits};
        }"""
        )
        assert found["labels"] >= 10
        assert found["hits"] == [], f"{trial.id}: labels overlap: {found['hits']}"
        assert pg.evaluate(PAGE_FITS)


@pytest.mark.parametrize("width", WIDTHS)
def test_index_rows_describe_their_scenario(
    page: tuple[Any, Watch], layout_run: tuple[Path, Results], width: int
) -> None:
    pg, _ = page
    out, results = layout_run
    _open(pg, out / "index.html", width)
    matrix = build_matrix(results)
    rows = pg.locator("#matrix tbody tr")
    assert rows.count() == len(matrix.rows)
    for i, row in enumerate(matrix.rows):
        told = [t for c in row.cells for t in c.trials if t.description]
        assert told, row.scenario
        head = rows.nth(i).locator("th")
        assert head.locator(".row-desc").inner_text() == told[0].description
        wanted = next(t.expected for c in row.cells for t in c.trials if t.expected)
        assert wanted in head.locator(".row-expected").inner_text()
        inside = head.evaluate(
            """th => {
            const o = th.getBoundingClientRect();
            const d = th.querySelector(".row-desc").getBoundingClientRect();
            return d.width > 0 && d.left >= o.left - 1 && d.right <= o.right + 1;
        }"""
        )
        assert inside
    assert pg.evaluate(PAGE_FITS), "the index scrolls sideways"
