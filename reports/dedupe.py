"""Before a merge: one result per (matrix hash, cell, seed), and one matrix only.

A Kubernetes Indexed Job replaces a failed pod with one of the same index, so a shard
can be run (and its results.json written) twice under one seed. Each trial carries the
matrix's hash, its cell and its seed (``harness.shards``); two trials with one key are
one result told twice: the worse verdict is kept (a violation is never dropped for a
held copy), the first on a tie, and every dropped copy is named. Results of another
matrix (another cell list, another target config) are refused: they answer another
question.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.contract.errors import ConfigError
from harness.contract.vocabulary import severity
from reports.model import Results, TrialRow


@dataclass(frozen=True)
class Dropped:
    """A duplicate left out of a merge, and the copy kept in its place."""

    cell: str
    seed: int | None
    run_id: str
    kept_run_id: str
    verdict: str
    kept_verdict: str

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def dropped_line(d: Mapping[str, Any]) -> str:
    """One ``duplicates_dropped`` entry of a merged results.json, as a sentence."""
    return (
        f"dropped the duplicate of {d['cell']} (seed {d['seed']}) from run {d['run_id']} "
        f"({d['verdict']}); kept run {d['kept_run_id']} ({d['kept_verdict']})"
    )


def matrix_of(results: Results) -> str | None:
    found = results.extra.get("matrix_hash")
    return found if isinstance(found, str) else None


def one_matrix(results_list: Sequence[Results], names: Sequence[str] = ()) -> None:
    """Refuse results of two matrices, naming the first file (or run) of each."""
    seen: dict[str, str] = {}
    for i, results in enumerate(results_list):
        digest = matrix_of(results)
        if digest is None:
            continue
        name = names[i] if i < len(names) else f"run {results.run_id}"
        first = seen.setdefault(digest, name)
        if len(seen) > 1:
            (other, where), *_ = ((d, n) for d, n in seen.items() if d != digest)
            raise ConfigError(
                f"report: {first} is of matrix {digest}, {where} of matrix {other}; "
                "merge only results of one matrix (the same cells and target config)"
            )


def drop_duplicates(results_list: Sequence[Results]) -> tuple[list[Results], list[Dropped]]:
    """``results_list`` with each (matrix hash, cell, seed) held by one trial only."""
    kept: dict[tuple[str, str, int | None], tuple[TrialRow, str]] = {}
    for results in results_list:
        for trial in results.trials:
            key = _key(trial)
            if key is None:
                continue
            run = trial.run_id or results.run_id
            seen = kept.get(key)
            if seen is None or severity(trial.verdict) > severity(seen[0].verdict):
                kept[key] = (trial, run)
    dropped: list[Dropped] = []
    out: list[Results] = []
    emitted: set[tuple[str, str, int | None]] = set()
    for results in results_list:
        trials = []
        for trial in results.trials:
            key = _key(trial)
            if key is None:
                trials.append(trial)
                continue
            run = trial.run_id or results.run_id
            winner, winner_run = kept[key]
            # The kept copy once; the same file passed twice has it twice, by identity
            # only the first time.
            if key not in emitted and trial is winner and run == winner_run:
                emitted.add(key)
                trials.append(trial)
                continue
            dropped.append(
                Dropped(trial.id, trial.seed, run, winner_run, trial.verdict, winner.verdict)
            )
        out.append(dataclasses.replace(results, trials=tuple(trials)))
    return out, dropped


def _key(trial: TrialRow) -> tuple[str, str, int | None] | None:
    digest = trial.extra.get("matrix_hash")
    if not isinstance(digest, str):
        return None
    cell = trial.extra.get("cell")
    return digest, cell if isinstance(cell, str) else trial.id, trial.seed
