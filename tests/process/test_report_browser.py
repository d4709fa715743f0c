"""The HTML report in a real headless Chromium over file://: counts, filter, hide held,
keyboard, navigation to a trial, the timeline, the review desk of a real run, and proof
that no worker script runs."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import clikit
import pytest

from harness.pytest_plugin import missing
from reports import build_report, load_results
from reports.matrix import build_matrix
from reports.model import Results

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
