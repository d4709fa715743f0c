"""The detection benchmarks' arithmetic and their share of bench.json; nothing is run."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.bench_detection import ORIGINAL, ratio, shown
from benchmarks.explore_medians import median
from benchmarks.stats import write_bench
from scenarios.mutants import MUTANTS


def test_bench_json_keeps_what_other_benchmarks_wrote(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    write_bench({"matrix": {"1": 2}, "oracle_s": 1.0}, path)
    write_bench({"detection": {"budget": 50}}, path)
    write_bench({"oracle_s": 0.5}, path)
    assert json.loads(path.read_text()) == {
        "matrix": {"1": 2},
        "oracle_s": 0.5,
        "detection": {"budget": 50},
    }


def test_a_file_that_is_not_json_is_started_again(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    path.write_text("{half")
    write_bench({"detection": {}}, path)
    assert json.loads(path.read_text()) == {"detection": {}}


def test_ratios_say_when_a_search_found_nothing() -> None:
    assert ratio(30, 10, 92, 50) == "3.0x"
    # Random found nothing in 50: at least 50/10.
    assert ratio(None, 10, 50, 50) == ">5.0x"
    # Explore found nothing in 50, the matrix in 20: at most 20/50.
    assert ratio(20, None, 92, 50) == "<0.4x"
    assert ratio(None, None, 50, 50) == "-"
    assert shown(None, 50) == ">50"
    assert shown(7, 50) == "7"


def test_a_median_past_the_budget_is_none() -> None:
    assert median([3, 5, None, 9, 11], 50) == 9
    assert median([3, None, None, 9, None], 50) is None
    assert median([4, 6], 50) == 5


def test_the_original_twelve_are_the_first_twelve_mutants() -> None:
    assert len(ORIGINAL) == 12
    assert ORIGINAL[0] == "fresh_key_per_attempt"
    assert ORIGINAL[-1] == "ack_before_effect"
    assert set(ORIGINAL) < set(MUTANTS)
