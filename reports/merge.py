"""Merge the results of several shards (``--shard i/n``) or runs into one ``Results``.

Trial ids stay unique. When the same id appears more than once:
- same run id and identical content: one shard was passed twice, keep one copy;
- same run id, different content: a run cannot hold two different trials under one
  id, so this is an error naming both files' run;
- different run ids (the same cell run twice, e.g. with another seed): keep both, each
  tagged with ``run_id`` so pages, links and JUnit names stay distinct
  (``Trial.key`` is then ``<id>@<run_id>``).
The summary is never merged: ``Results.summary`` is always recomputed from the trials.
First, results that carry a matrix hash are checked to be of one matrix and left with
one trial per (matrix hash, cell, seed) (``reports.dedupe``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from harness.contract.errors import ConfigError
from reports.dedupe import Dropped, drop_duplicates, one_matrix
from reports.model import KillMatrix, MutantResult, Results, TrialRow

T = TypeVar("T")


def merge(results_list: Sequence[Results], names: Sequence[str] = ()) -> Results:
    """``results_list`` as one; ``names`` (their files) name them in an error."""
    if not results_list:
        raise ConfigError("merge: no results given; pass at least one results.json")
    if len(results_list) == 1:
        return results_list[0]
    one_matrix(results_list, names)
    run_ids = _unique(r.run_id for r in results_list)
    results_list, dropped = drop_duplicates(results_list)
    first = results_list[0]
    trials = _merge_trials(results_list)
    seeds = _unique(r.seed for r in results_list)
    commands = _unique(r.command for r in results_list)
    durations = [r.duration_s for r in results_list if r.duration_s is not None]
    starts = [r.started_at for r in results_list if r.started_at]
    ends = [r.finished_at for r in results_list if r.finished_at]
    environment: dict[str, str | None] = {}
    for r in results_list:
        for key, value in r.environment.items():
            # Shards may run on different machines; the first non-null version wins,
            # since one line per tool is what a reader of the header wants.
            if environment.get(key) is None:
                environment[key] = value
    return Results(
        run_id=run_ids[0] if len(run_ids) == 1 else "merged-" + "+".join(run_ids),
        seed=seeds[0] if len(seeds) == 1 else None,
        target=first.target,
        trials=tuple(trials),
        environment=environment,
        command=commands[0] if len(commands) == 1 else "report",
        # ISO-8601 UTC strings order lexically, so min/max need no parsing.
        started_at=min(starts) if starts else None,
        finished_at=max(ends) if ends else None,
        duration_s=round(sum(durations), 6) if durations else None,
        kill_matrix=_merge_kill_matrices([r.kill_matrix for r in results_list]),
        merged_from=tuple(run_ids),
        extra=_merged_extra(first.extra, results_list, dropped),
    )


def _merged_extra(
    first: Mapping[str, Any], results_list: Sequence[Results], dropped: Sequence[Dropped]
) -> dict[str, Any]:
    """The first shard's extra keys, with every shard's not-applicable cells together
    (each shard lists only those of its own share of the matrix), and the duplicates
    the merge dropped."""
    extra = dict(first)
    if dropped:
        extra["duplicates_dropped"] = [d.to_json() for d in dropped]
    by_reason: dict[str, set[str]] = {}
    for r in results_list:
        for group in r.extra.get("not_applicable") or []:
            by_reason.setdefault(str(group["reason"]), set()).update(group["cells"])
    if by_reason:
        extra["not_applicable"] = [
            {"reason": reason, "cells": sorted(cells)} for reason, cells in by_reason.items()
        ]
    return extra


def _merge_trials(results_list: Sequence[Results]) -> list[TrialRow]:
    by_id: dict[str, list[TrialRow]] = {}
    order: list[str] = []
    for results in results_list:
        for trial in results.trials:
            tagged = trial if trial.run_id is not None else _tag(trial, results.run_id)
            group = by_id.setdefault(trial.id, [])
            if not group:
                order.append(trial.id)
            same_run = [t for t in group if t.run_id == tagged.run_id]
            if same_run:
                if same_run[0] == tagged:
                    continue
                raise ConfigError(
                    f"merge: run {tagged.run_id!r} holds two different trials with id "
                    f"{trial.id!r}; a shard was edited or two runs share a run id. "
                    "Merge only shards of distinct runs"
                )
            group.append(tagged)
    out: list[TrialRow] = []
    for trial_id in order:
        group = by_id[trial_id]
        if len(group) == 1 and group[0].run_id is not None:
            # No clash: drop the tag so the id stays the page name and JUnit name.
            out.append(dataclasses.replace(group[0], run_id=None))
        else:
            out.extend(group)
    return out


def _tag(trial: TrialRow, run_id: str) -> TrialRow:
    return dataclasses.replace(trial, run_id=run_id)


def _merge_kill_matrices(matrices: Sequence[KillMatrix | None]) -> KillMatrix | None:
    present = [m for m in matrices if m is not None]
    if not present:
        return None
    mutants: dict[str, MutantResult] = {}
    for km in present:
        for m in km.mutants:
            seen = mutants.get(m.name)
            if seen is None:
                mutants[m.name] = m
                continue
            mutants[m.name] = dataclasses.replace(
                seen,
                killed=seen.killed or m.killed,
                by=tuple(_unique([*seen.by, *m.by])),
                invariants=tuple(_unique([*seen.invariants, *m.invariants])),
            )
    trials = [m.correct_trials for m in present if m.correct_trials is not None]
    violations = [m.correct_violations for m in present if m.correct_violations is not None]
    # Complete only if every part ran every cell; unsaid if some part does not say.
    modes = {m.mode for m in present}
    mode = "until_killed" if "until_killed" in modes else modes.pop() if len(modes) == 1 else None
    return KillMatrix(
        mutants=tuple(mutants.values()),
        correct_trials=sum(trials) if trials else None,
        correct_violations=sum(violations) if violations else None,
        mode=mode,
    )


def _unique(items: Iterable[T]) -> list[T]:
    out: list[T] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out
