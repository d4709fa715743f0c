"""``crashpoint demo``: the full matrix on the embedded default (reference worker,
SQLite, processes), nothing to install."""

from __future__ import annotations

import random
from pathlib import Path

from harness.commands.console import console, print_summary
from harness.commands.matrix import (
    MatrixOptions,
    interrupted_code,
    run_matrix,
    worst,
)
from harness.commands.outputs import keep_run
from harness.contract.vocabulary import ExitCode
from harness.infra import RunInfra
from harness.results import exit_code
from harness.run_width import resolve_jobs


def demo_command(*, out: Path, seed: int | None, jobs: int | None) -> int:
    seed = seed if seed is not None else random.randrange(2**31)
    opts = MatrixOptions(out=out, seed=seed, jobs=jobs)
    chosen = opts.cells()
    jobs = resolve_jobs(jobs, len(chosen))
    console.print(
        f"crashpoint demo: {len(chosen)} trials of the reference worker on SQLite "
        f"(seed {seed}, {jobs} at a time)"
    )
    with RunInfra.open(chosen, ledger="sqlite", backend="process", pg_dsn=None) as infra:
        doc = run_matrix(
            infra,
            chosen,
            seed=seed,
            command="demo",
            jobs=jobs,
            target={"name": "reference", "kind": "reference", "mutant": None},
        )
    out, kept = keep_run(doc, out)
    print_summary(doc, out)
    stopped = interrupted_code(doc)
    if stopped is not None:
        return stopped
    code = exit_code(doc["summary"], strict=False)
    return code if kept else worst(code, ExitCode.INCONCLUSIVE)
