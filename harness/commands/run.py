"""``crashpoint run``: the matrix against the reference worker (or a mutant of it), or
against a command target described by ``crashpoint.toml``."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

from harness.commands.console import console, print_summary
from harness.commands.matrix import (
    MatrixOptions,
    interrupted_code,
    run_matrix,
    worst,
)
from harness.commands.outputs import keep_run
from harness.commands.target import ResolvedTarget, by_persona, resolve_target
from harness.contract.vocabulary import ExitCode
from harness.infra import RunInfra
from harness.maxfail import StopAfterFailures
from harness.results import exit_code
from harness.shards import matrix_hash, stamp_matrix


def run_command(
    opts: MatrixOptions,
    *,
    config_path: Path | None,
    target: str | None,
    mutant: str | None,
    repeat: int = 1,
    keep_state: bool = False,
    maxfail: int | None = None,
) -> int:
    resolved = resolve_target(config_path, target, mutant, discover_in=Path.cwd())
    console.print(resolved.headline(), markup=False, highlight=False, soft_wrap=True)
    command = resolved.command
    target_doc = resolved.doc
    opts, replay = _for_target(opts, resolved)
    seed = opts.seed if opts.seed is not None else random.randrange(2**31)
    chosen = opts.cells(mutant=mutant)
    # Of the whole matrix, not this shard's share: every shard of a run carries one hash.
    digest = matrix_hash(replace(opts, shard=None).cells(mutant=mutant), target_doc)
    code: int = ExitCode.HELD
    with RunInfra.open(
        chosen,
        ledger=opts.ledger,
        backend=opts.backend,
        pg_dsn=opts.pg_dsn,
        command=command,
        lease_ttl_s=opts.lease_ttl_s,
    ) as infra:
        if keep_state:
            infra.config = replace(infra.config, keep_state_in=(opts.out / "state").resolve())
        for i in range(repeat):
            doc = run_matrix(
                infra,
                chosen,
                seed=seed + i,
                command="run",
                jobs=opts.jobs,
                target=target_doc,
                replay_prefix=replay,
                label=f"run {i + 1}/{repeat}" if repeat > 1 else "run",
                gate=StopAfterFailures(maxfail) if maxfail else None,
            )
            stamp_matrix(doc, digest)
            run_out = opts.out if repeat == 1 else opts.out / f"run-{i + 1:03d}"
            run_out, kept = keep_run(doc, run_out)
            print_summary(doc, run_out)
            stopped = interrupted_code(doc)
            if stopped is not None:
                return stopped
            code = worst(
                code,
                exit_code(doc["summary"], strict=opts.strict, fail_on_warning=opts.fail_on_warning),
            )
            if not kept:
                code = worst(code, ExitCode.INCONCLUSIVE)
    return code


def _for_target(opts: MatrixOptions, resolved: ResolvedTarget) -> tuple[MatrixOptions, list[str]]:
    """The options as a configured target narrows them (its providers, lease and steps),
    and the flags that replay it; the reference worker's options are as given."""
    command = resolved.command
    if command is None:
        return opts, []
    opts = replace(
        opts,
        declared=resolved.declared,
        providers=by_persona(opts.providers, command.providers),
        lease_ttl_s=opts.lease_ttl_s or command.lease_ttl_s,
        steps=command.steps,
    )
    return opts, resolved.flags
