"""``crashpoint selftest``: the correct worker must hold every cell, and every mutant must
be killed by some cell.

By default a mutant stops once a trial caught it by the invariant it predicts (its other
cells are recorded as skipped, ``harness.kill_admission``); ``--full`` runs every cell of every
mutant for the complete kill matrix. The correct worker runs all its cells either way."""

from __future__ import annotations

import random
from dataclasses import replace

from harness.commands.console import console, print_kill_matrix
from harness.commands.matrix import MatrixOptions, run_matrix, worst
from harness.commands.outputs import keep_run
from harness.contract.vocabulary import ExitCode, Verdict
from harness.infra import RunInfra
from harness.kill_admission import StopWhenKilled
from harness.killmatrix import kill_matrix
from harness.results import exit_code, summarize
from scenarios.mutants import MUTANTS


def selftest_command(opts: MatrixOptions, *, full: bool = False) -> int:
    seed = opts.seed if opts.seed is not None else random.randrange(2**31)
    # One crash signal is enough to tell mutants apart; the full run covers SIGTERM.
    opts = replace(opts, signals=opts.signals or ("SIGKILL", "SIGSTOP"))
    all_cells = opts.cells()
    for name in sorted(MUTANTS):
        all_cells += opts.cells(mutant=name)
    with RunInfra.open(
        all_cells,
        ledger=opts.ledger,
        backend=opts.backend,
        pg_dsn=opts.pg_dsn,
        lease_ttl_s=opts.lease_ttl_s,
    ) as infra:
        doc = run_matrix(
            infra,
            all_cells,
            seed=seed,
            command="selftest",
            jobs=opts.jobs,
            target={"name": "reference", "kind": "reference", "mutant": None},
            gate=None if full else StopWhenKilled(MUTANTS),
        )
    doc["kill_matrix"] = kill_matrix(
        doc["trials"], MUTANTS, mode="full" if full else "until_killed"
    )
    out, kept = keep_run(doc, opts.out)
    print_kill_matrix(doc)
    correct = [t for t in doc["trials"] if t["mutant"] is None]
    survivors = [m for m, row in doc["kill_matrix"]["mutants"].items() if not row["killed"]]
    summary = summarize(correct)
    console.print(f"report: {out / 'index.html'}")
    if summary[Verdict.VIOLATED] or survivors:
        return ExitCode.VIOLATED
    code = exit_code(summary, strict=opts.strict, fail_on_warning=opts.fail_on_warning)
    return code if kept else worst(code, ExitCode.INCONCLUSIVE)
