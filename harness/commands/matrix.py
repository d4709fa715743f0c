"""What every matrix command shares: its options, one pass over the cells with
progress, and how the exit codes of several passes combine (the trial settings are the
run's infrastructure's: :func:`harness.infra.trial_settings`)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.commands.console import progress_printer
from harness.contract.vocabulary import ExitCode, Verdict, severity
from harness.infra import RunInfra
from harness.plan import Cell, select_cells
from harness.results import results_document
from harness.runner import Admission, RunInterrupted, RunSpec, run_cells, run_spec
from harness.shards import resolve_shard
from harness.trial_run import TrialResult

#: When a command runs several times, its exit codes rank as the verdicts they stand for
#: (``harness.contract.vocabulary.VERDICT_ORDER``: a violation outweighs an inconclusive
#: run, which outweighs all held); any other code (a usage error, an interrupt)
#: outweighs them all.
_SEVERITY: dict[int, int] = {
    code: severity(Verdict[code.name]) for code in ExitCode if code.name in Verdict.__members__
}


@dataclass(frozen=True)
class MatrixOptions:
    """The options every matrix command shares (see ``harness.cli_options``)."""

    scenarios: Sequence[str] = ()
    points: Sequence[str] = ()
    providers: Sequence[str] = ()
    signals: Sequence[str] = ()
    ledger: str = "sqlite"
    backend: str = "process"
    seed: int | None = None
    out: Path = Path("crashpoint-out")
    strict: bool = False
    fail_on_warning: bool = False
    #: Trials at once; None: the run's default (``harness.run_width``).
    jobs: int | None = None
    shard: str | None = None
    lease_ttl_s: float | None = None
    pg_dsn: str | None = None
    #: A command target's providers, ``(name, kind)``; None: the reference's, per kind.
    declared: Sequence[tuple[str, str]] | None = None
    #: A command target's multi-step job, ``(step, provider)``; empty: none declared.
    steps: Sequence[tuple[str, str]] = ()

    def cells(self, *, mutant: str | None = None) -> list[Cell]:
        """The cells to run: this shard's (``--shard auto`` read from the environment)."""
        return select_cells(
            scenarios=self.scenarios,
            points=self.points,
            providers=self.providers,
            signals=self.signals,
            ledger=self.ledger,
            backend=self.backend,
            mutant=mutant,
            shard=resolve_shard(self.shard, os.environ),
            declared=self.declared,
            steps=self.steps,
        )


def execute(spec: RunSpec, *, label: str) -> list[TrialResult]:
    """Run the spec's cells, showing progress."""
    bar, advance = progress_printer(len(spec.cells), label)
    if bar is None:
        return run_cells(spec, progress=advance)
    with bar:
        return run_cells(spec, progress=advance)


def run_matrix(
    infra: RunInfra,
    cells: Sequence[Cell],
    *,
    seed: int,
    command: str,
    jobs: int | None,
    target: dict[str, Any],
    replay_prefix: Sequence[str] = (),
    label: str | None = None,
    gate: Admission | None = None,
) -> dict[str, Any]:
    """Run ``cells`` once and return the results document."""
    spec = run_spec(infra, cells, seed=seed, command=command, jobs=jobs, target=target)
    spec.gate = gate
    spec.replay_flags = [*replay_prefix, *spec.replay_flags]
    started = time.time()
    try:
        results = execute(spec, label=label or command)
    except RunInterrupted as stop:
        # The finished trials are written, marked, rather than lost with the rest.
        doc = results_document(
            spec, stop.finished, started=started, environment=infra.environment()
        )
        doc["interrupted"] = {
            "signal": stop.signal_name,
            "finished": len(stop.finished),
            "cells": len(spec.cells),
        }
        return doc
    return results_document(spec, results, started=started, environment=infra.environment())


def interrupted_code(doc: Mapping[str, Any]) -> int | None:
    """130 (SIGINT) or 143 (SIGTERM) for a run stopped part-way, as a shell reports it;
    None for a run that finished."""
    stop = doc.get("interrupted")
    if not stop:
        return None
    return 128 + (signal.SIGTERM if stop["signal"] == "SIGTERM" else signal.SIGINT)


def worst(*codes: int) -> int:
    """The exit code that speaks for several passes of a command."""
    above_all = max(_SEVERITY.values()) + 1
    return max(codes, key=lambda code: _SEVERITY.get(code, above_all))
