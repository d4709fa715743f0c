"""Merging shards: unique ids, clashes kept apart by run id, summary recomputed; writing."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from harness.contract.errors import ConfigError
from reports import build_report, load_results, merge, write_results, write_run
from reports.model import Results

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"


@pytest.fixture
def run_small() -> Results:
    return load_results(FIXTURES / "run_small.json")


def shards(results: Results, n: int) -> list[Results]:
    return [
        dataclasses.replace(results, trials=results.trials[i::n], duration_s=1.0) for i in range(n)
    ]


def test_merging_shards_gives_back_every_trial(run_small: Results) -> None:
    merged = merge(shards(run_small, 3))
    assert sorted(t.key for t in merged.trials) == sorted(t.key for t in run_small.trials)
    assert merged.summary == run_small.summary
    assert merged.run_id == run_small.run_id
    assert merged.duration_s == 3.0
    # No tag added: only the fixture's own clash (a run and its rerun) stays tagged.
    assert {t.key: t.run_id for t in merged.trials} == {t.key: t.run_id for t in run_small.trials}


def test_summary_is_recomputed_after_merge(run_small: Results) -> None:
    a, b = shards(run_small, 2)
    merged = merge([a, b])
    assert merged.summary.total == a.summary.total + b.summary.total
    assert merged.summary.violated == a.summary.violated + b.summary.violated


def test_same_shard_twice_is_deduplicated(run_small: Results) -> None:
    a, b = shards(run_small, 2)
    merged = merge([a, b, a])
    assert merged.summary.total == run_small.summary.total


def test_same_id_from_two_runs_keeps_both_apart(run_small: Results, tmp_path: Path) -> None:
    rerun = dataclasses.replace(
        run_small,
        run_id="20261130T050000-aaaa",
        trials=tuple(dataclasses.replace(t, seed=1) for t in run_small.trials[:2]),
    )
    merged = merge([run_small, rerun])
    assert merged.summary.total == run_small.summary.total + 2
    clashing = [t for t in merged.trials if t.id == run_small.trials[0].id]
    assert {t.run_id for t in clashing} == {run_small.run_id, "20261130T050000-aaaa"}
    assert len({t.key for t in merged.trials}) == len(merged.trials)
    assert clashing[0].key == f"{clashing[0].id}@{run_small.run_id}"
    assert merged.merged_from == (run_small.run_id, "20261130T050000-aaaa")
    assert merged.run_id.startswith("merged-")
    # The tag survives a round trip through results.json.
    assert load_results(write_results(merged, tmp_path / "merged.json")) == merged


def test_same_run_different_trial_under_one_id_is_an_error(run_small: Results) -> None:
    edited = dataclasses.replace(
        run_small,
        trials=(dataclasses.replace(run_small.trials[0], verdict="violated"),),
    )
    with pytest.raises(
        ConfigError, match=rf"run '{re.escape(run_small.run_id)}' holds two different"
    ):
        merge([run_small, edited])


def test_kill_matrices_merge_by_mutant() -> None:
    selftest = load_results(FIXTURES / "selftest.json")
    assert selftest.kill_matrix is not None
    (survivor,) = (m for m in selftest.kill_matrix.mutants if not m.killed)
    killed_later = dataclasses.replace(
        survivor, killed=True, by=("x.idempotent.SIGKILL",), invariants=("nothing_lost",)
    )
    other = dataclasses.replace(
        selftest,
        run_id="other",
        trials=(),
        kill_matrix=dataclasses.replace(
            selftest.kill_matrix, mutants=(killed_later,), correct_trials=2
        ),
    )
    merged = merge([selftest, other]).kill_matrix
    assert merged is not None
    assert merged.killed == 3
    assert merged.correct_trials == 5
    by_name = {m.name: m for m in merged.mutants}
    assert by_name["ack_before_effect"].by == ("x.idempotent.SIGKILL",)


@pytest.mark.parametrize(
    ("modes", "merged"),
    [
        (("full", "full"), "full"),
        (("full", "until_killed"), "until_killed"),
        (("full", None), None),
    ],
)
def test_a_merged_kill_matrix_is_complete_only_if_every_part_was(
    modes: tuple[str | None, str | None], merged: str | None
) -> None:
    selftest = load_results(FIXTURES / "selftest.json")
    assert selftest.kill_matrix is not None
    parts = [
        dataclasses.replace(
            selftest,
            run_id=f"r{i}",
            trials=selftest.trials[i::2],
            kill_matrix=dataclasses.replace(selftest.kill_matrix, mode=mode),
        )
        for i, mode in enumerate(modes)
    ]
    km = merge(parts).kill_matrix
    assert km is not None
    assert km.mode == merged


def test_merge_of_nothing_is_an_error() -> None:
    with pytest.raises(ConfigError, match="no results given"):
        merge([])


def test_build_report_merges_files_and_writes_everything(tmp_path: Path) -> None:
    run_small = load_results(FIXTURES / "run_small.json")
    paths = []
    for i, shard in enumerate(shards(run_small, 2)):
        paths.append(write_results(shard, tmp_path / f"shard{i}" / "results.json"))
    out = tmp_path / "report"
    merged = build_report(paths, out)
    assert merged.summary == run_small.summary
    for name in ("results.json", "index.html", "junit.xml", "summary.md"):
        assert (out / name).is_file(), name
    assert load_results(out / "results.json").summary == run_small.summary
    assert len(list((out / "trials").glob("*.html"))) == run_small.summary.total


def test_write_run_stores_the_engines_document_as_is_and_draws_the_reports(
    tmp_path: Path,
) -> None:
    doc = json.loads((FIXTURES / "selftest.json").read_text(encoding="utf-8"))
    # Keys the engine writes that the report model does not read must survive.
    doc["kill_matrix"]["correct_worker"]["inconclusive"] = 0
    doc["engine_note"] = {"kept": True}
    files = write_run(doc, tmp_path / "out")
    assert json.loads(files.results_json.read_text(encoding="utf-8")) == doc
    for path in (files.index_html, files.junit_xml, files.summary_md):
        assert path.is_file(), path
    pages = list((tmp_path / "out" / "trials").glob("*.html"))
    assert len(pages) == len(doc["trials"])
