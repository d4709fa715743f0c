"""--shard auto (an Indexed Job's JOB_COMPLETION_INDEX) and the matrix hash."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.contract.errors import ConfigError
from harness.plan import select_cells
from harness.shards import matrix_hash, resolve_shard, stamp_matrix


@pytest.mark.parametrize(
    ("text", "env", "shard"),
    [
        ("auto/4", {"JOB_COMPLETION_INDEX": "0"}, "1/4"),
        ("auto/4", {"JOB_COMPLETION_INDEX": "3"}, "4/4"),
        ("auto", {"JOB_COMPLETION_INDEX": "1", "CRASHPOINT_SHARDS": "3"}, "2/3"),
        ("2/5", {"JOB_COMPLETION_INDEX": "0"}, "2/5"),  # an explicit shard wins
        (None, {"JOB_COMPLETION_INDEX": "0"}, None),
    ],
)
def test_auto_is_the_pods_index_plus_one_of_n(
    text: str | None, env: dict[str, str], shard: str | None
) -> None:
    assert resolve_shard(text, env) == shard


@pytest.mark.parametrize(
    ("text", "env", "says"),
    [
        ("auto/4", {}, "JOB_COMPLETION_INDEX is not set"),
        ("auto/4", {"JOB_COMPLETION_INDEX": "4"}, "not below the shard count 4"),
        ("auto/4", {"JOB_COMPLETION_INDEX": "-1"}, "not below"),
        ("auto/4", {"JOB_COMPLETION_INDEX": "x"}, "not a whole number"),
        ("auto/0", {"JOB_COMPLETION_INDEX": "0"}, "at least 1"),
        ("auto/n", {"JOB_COMPLETION_INDEX": "0"}, "not a whole number"),
        ("auto", {"JOB_COMPLETION_INDEX": "0"}, "set CRASHPOINT_SHARDS"),
        ("automatic", {"JOB_COMPLETION_INDEX": "0"}, "must be i/n, auto or auto/N"),
    ],
)
def test_a_bad_auto_shard_is_one_line(text: str, env: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        resolve_shard(text, env)
    assert "\n" not in str(caught.value)


def test_every_shard_of_a_matrix_together_is_the_matrix() -> None:
    whole = select_cells(scenarios=["crash_after_external_success"])
    env = {"CRASHPOINT_SHARDS": "3"}
    shards = [
        select_cells(
            scenarios=["crash_after_external_success"],
            shard=resolve_shard("auto", {**env, "JOB_COMPLETION_INDEX": str(i)}),
        )
        for i in range(3)
    ]
    assert sorted(c.id for s in shards for c in s) == sorted(c.id for c in whole)


def test_the_hash_is_stable_and_changes_with_the_cells_or_the_config(tmp_path: Path) -> None:
    cells = select_cells(scenarios=["crash_after_external_success"])
    target = {"name": "reference", "kind": "reference", "mutant": None}
    digest = matrix_hash(cells, target)
    assert digest == matrix_hash(list(reversed(cells)), dict(target))
    assert digest != matrix_hash(cells[1:], target)
    assert digest != matrix_hash(cells, {**target, "mutant": "fresh_key_per_attempt"})
    config = tmp_path / "crashpoint.toml"
    config.write_text("[target]\nworkers = 2\n")
    told = {**target, "config": str(config), "config_line": 1}
    before = matrix_hash(cells, told)
    # Where the file is read from does not count; what it says does.
    assert before == matrix_hash(cells, {**told, "config": str(config), "config_line": 3})
    config.write_text("[target]\nworkers = 3\n")
    assert matrix_hash(cells, told) != before


def test_each_trial_carries_the_hash_its_cell_and_its_seed() -> None:
    doc = {"trials": [{"id": "a.b", "seed": 7}, {"id": "c.d", "seed": 8}]}
    stamp_matrix(doc, "sha256:0123")
    assert doc["matrix_hash"] == "sha256:0123"
    assert doc["trials"] == [
        {"id": "a.b", "seed": 7, "matrix_hash": "sha256:0123", "cell": "a.b"},
        {"id": "c.d", "seed": 8, "matrix_hash": "sha256:0123", "cell": "c.d"},
    ]
