"""A merge keeps one result per (matrix hash, cell, seed), names each duplicate it
dropped, and refuses results of another matrix."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness.contract.errors import ConfigError
from harness.contract.vocabulary import Verdict
from reports import build_report, load_results, merge, write_results
from reports.dedupe import dropped_line
from reports.model import Results

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"
HASH = "sha256:00aa"


def stamped(results: Results, digest: str = HASH, run_id: str | None = None) -> Results:
    trials = tuple(
        dataclasses.replace(t, extra={**t.extra, "matrix_hash": digest, "cell": t.id})
        for t in results.trials
    )
    return dataclasses.replace(
        results,
        trials=trials,
        run_id=run_id or results.run_id,
        extra={**results.extra, "matrix_hash": digest},
    )


@pytest.fixture
def small() -> Results:
    """run_small without its own rerun (two runs of one cell): one trial per cell."""
    run = load_results(FIXTURES / "run_small.json")
    return dataclasses.replace(run, trials=tuple(t for t in run.trials if t.run_id is None))


def shards(results: Results, n: int) -> list[Results]:
    return [
        stamped(dataclasses.replace(results, trials=results.trials[i::n]), run_id=f"shard-{i + 1}")
        for i in range(n)
    ]


def test_a_shard_run_twice_gives_one_result_per_cell_and_names_the_dropped(
    small: Results,
) -> None:
    a, b, c = shards(small, 3)
    again = dataclasses.replace(b, run_id="shard-2-again")
    merged = merge([a, b, again, c])
    assert sorted(t.id for t in merged.trials) == sorted(t.id for t in small.trials)
    assert all(t.run_id is None for t in merged.trials)
    dropped = merged.extra["duplicates_dropped"]
    assert [(d["cell"], d["run_id"], d["kept_run_id"]) for d in dropped] == [
        (t.id, "shard-2-again", "shard-2") for t in b.trials
    ]
    assert dropped_line(dropped[0]).startswith(f"dropped the duplicate of {b.trials[0].id} (seed")


def test_the_worse_verdict_is_kept_whichever_came_first(small: Results) -> None:
    (one,) = shards(small, 1)
    held = next(t for t in one.trials if t.verdict == Verdict.HELD)
    flaky = dataclasses.replace(held, verdict=Verdict.VIOLATED)
    second = dataclasses.replace(one, run_id="again", trials=(flaky,))
    merged = merge([one, second])
    assert merged.trial(held.id).verdict == Verdict.VIOLATED
    (dropped,) = merged.extra["duplicates_dropped"]
    assert (dropped["run_id"], dropped["verdict"], dropped["kept_verdict"]) == (
        one.run_id,
        "held",
        "violated",
    )


def test_another_seed_is_another_result_not_a_duplicate(small: Results) -> None:
    (one,) = shards(small, 1)
    reseeded = dataclasses.replace(
        one,
        run_id="reseeded",
        trials=tuple(dataclasses.replace(t, seed=(t.seed or 0) + 1) for t in one.trials[:2]),
    )
    merged = merge([one, reseeded])
    assert len(merged.trials) == len(one.trials) + 2
    assert "duplicates_dropped" not in merged.extra


def test_results_of_another_matrix_are_refused_in_one_line(small: Results, tmp_path: Path) -> None:
    a, b = shards(small, 2)
    other = stamped(b, "sha256:11bb")
    paths = [write_results(a, tmp_path / "a.json"), write_results(other, tmp_path / "b.json")]
    with pytest.raises(ConfigError) as caught:
        build_report(paths, tmp_path / "out")
    message = str(caught.value)
    assert "\n" not in message
    assert all(str(p) in message for p in paths)
    assert all(digest in message for digest in ("sha256:11bb", HASH))


def test_the_merged_file_keeps_the_hash_and_the_dropped(small: Results, tmp_path: Path) -> None:
    a, b = shards(small, 2)
    paths = [
        write_results(a, tmp_path / "a.json"),
        write_results(b, tmp_path / "b.json"),
        write_results(dataclasses.replace(b, run_id="b2"), tmp_path / "b2.json"),
    ]
    build_report(paths, tmp_path / "out")
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert doc["matrix_hash"] == HASH
    assert {t["matrix_hash"] for t in doc["trials"]} == {HASH}
    assert len(doc["duplicates_dropped"]) == len(b.trials)
