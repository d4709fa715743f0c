"""``crashpoint explore``: Hypothesis fault schedules against real trials, shrunk; or the
random baseline (``--mode random``). Each kind of failure (the set of invariants it
broke) is its own finding, saved next to results.json as a schedule (``finding.json``
for the first, ``finding-2.json`` and on for the others; replayed by ``crashpoint
replay``) and as a pytest regression test; flaky findings are kept apart with their
reproduction rate."""

from __future__ import annotations

import os
import random
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis.database import DirectoryBasedExampleDatabase

from harness.applicable import effect_providers
from harness.commands.console import console
from harness.commands.target import ResolvedTarget, resolve_target
from harness.contract.errors import ConfigError
from harness.contract.vocabulary import ExitCode
from harness.exploration.evaluation import Confirm, Evaluation, Exploration, Finding, Kind
from harness.exploration.regression import regression_test
from harness.exploration.search import Explorer
from harness.exploration.strategy import Space
from harness.exploration.trials import ScheduleRunner
from harness.infra import RunInfra, trial_settings
from harness.results import exit_code, results_document, summarize
from harness.runner import run_spec
from harness.schedule import save
from reports import write_run

FINDING = "finding.json"
REGRESSION = "test_crashpoint_finding.py"


def finding_files(n: int) -> tuple[str, str]:
    """The schedule and regression test of the ``n``-th finding (from 1): the first keeps
    the stable names, the others are numbered (``finding-2.json``,
    ``test_crashpoint_finding_2.py``)."""
    if n == 1:
        return FINDING, REGRESSION
    return f"finding-{n}.json", f"test_crashpoint_finding_{n}.py"


MODES = ("hypothesis", "random")


@dataclass(frozen=True)
class ExploreOptions:
    budget: int
    seed: int | None
    out: Path
    mode: str = "hypothesis"
    confirm: str = "2/3"
    shrink_budget: int = 60
    network: bool = False
    ledger: str = "sqlite"
    backend: str = "process"
    lease_ttl_s: float | None = None
    pg_dsn: str | None = None
    #: Hypothesis's example database; shards of one exploration share it (a shared
    #: volume), so what one found the others replay first. None: OUT/.hypothesis.
    db: Path | None = None


def _beside(config_path: Path, out: Path) -> str:
    return os.path.relpath(config_path.resolve(), out.resolve())


def explore_command(
    opts: ExploreOptions, *, config_path: Path | None, target: str | None, mutant: str | None
) -> int:
    if opts.mode not in MODES:
        raise ConfigError(f"--mode {opts.mode!r} is unknown; use {' or '.join(MODES)}")
    confirm = Confirm.parse(opts.confirm)
    resolved = resolve_target(config_path, target, mutant, discover_in=Path.cwd())
    console.print(resolved.headline(), markup=False, highlight=False, soft_wrap=True)
    config_path = resolved.config_path
    seed = opts.seed if opts.seed is not None else random.randrange(2**31)
    aimed = effect_providers(resolved.command) if resolved.command is not None else None
    space = _space(resolved, opts, aimed, mutant=mutant)
    flags = [*resolved.flags, "--seed", str(seed), "--budget", str(opts.budget)]
    if opts.mode != "hypothesis":
        flags += ["--mode", opts.mode]
    again = shlex.join(["crashpoint", "explore", *flags])
    started = time.time()
    with RunInfra.open(
        [],
        ledger=opts.ledger,
        backend=opts.backend,
        pg_dsn=opts.pg_dsn,
        command=resolved.command,
        lease_ttl_s=opts.lease_ttl_s,
    ) as infra:
        runner = ScheduleRunner(infra, seed, mutant=mutant, declared=aimed, replay=again)
        # One database per target: a finding against one mutant is not replayed first
        # against another (the "reuse" phase replays what failed here before).
        key = resolved.doc["name"] + (f"-{mutant}" if mutant else "")
        database = DirectoryBasedExampleDatabase(str((opts.db or opts.out / ".hypothesis") / key))
        explorer = Explorer(
            runner,
            space,
            budget=opts.budget,
            seed=seed,
            confirm=confirm,
            shrink_budget=opts.shrink_budget,
            database=database if opts.mode == "hypothesis" else None,
            progress=_progress(opts.budget),
            on_shrink=_shrinking,
        )
        console.print(
            f"crashpoint explore ({opts.mode}): budget {opts.budget}, seed {seed}, "
            f"confirm {confirm}, target {key}",
            highlight=False,
        )
        found = explorer.explore() if opts.mode == "hypothesis" else explorer.random_baseline()
        spec = run_spec(infra, [], seed=seed, command="explore", jobs=1, target={})
        doc = results_document(spec, [], started=started, environment=infra.environment())
    doc["target"] = resolved.doc
    doc["trials"] = runner.trials
    doc["exploration"] = _exploration_doc(found, opts, confirm, seed, again)
    _save_findings(found, doc, opts.out, seed=seed, config=config_path)
    doc["summary"] = summarize(doc["trials"])
    write_run(doc, opts.out)
    _print_outcome(found, doc, opts.out)
    if found.finding is not None or found.flaky:
        return ExitCode.VIOLATED
    return exit_code(doc["summary"], strict=False)


def _space(
    resolved: ResolvedTarget,
    opts: ExploreOptions,
    aimed: list[tuple[str, str]] | None,
    *,
    mutant: str | None,
) -> Space:
    """The schedules' space for this target: its providers, lease and attempts."""
    # What the run's infrastructure gives every trial (the same call, the same settings).
    config = trial_settings(
        resolved.command, lease_ttl_s=opts.lease_ttl_s, pg_dsn=opts.pg_dsn, backend=opts.backend
    )
    kinds: tuple[str, ...] = ("idempotent", "plain")
    # Schedules aim at providers that can hold an effect (``aimed``): a model answers
    # plans, so a schedule aimed at it would hold it to an effect it never makes (a
    # false alarm).
    if aimed is not None:
        declared = {kind for _, kind in aimed}
        # Unqueryable only where nothing else is declared: each of the reference's mutants
        # shows on an idempotent or plain provider, and a third kind drawn beside them
        # makes every one of them slower to find.
        kinds = tuple(k for k in kinds if k in declared) or ("unqueryable",)
    config_path = resolved.config_path
    return Space(
        providers=kinds,
        lease_ttl_s=config.lease_ttl_s,
        http_timeout_s=config.http_timeout_s,
        max_attempts=resolved.max_attempts,
        network=opts.network,
        second_consumer=resolved.command is None,
        # Relative to the findings' directory, where replay looks first: a finding replayed
        # from another directory (or another checkout) still finds its target.
        target=resolved.doc["name"] if config_path is None else _beside(config_path, opts.out),
        mutant=mutant,
    )


def _progress(budget: int) -> Any:
    generated = [0]

    def show(ev: Evaluation) -> None:
        if ev.phase == "generate":
            generated[0] += 1
            where = f"[{generated[0]}/{budget}]"
        else:
            where = "[shrink]"
        glyph = {"failing": "✗", "flaky": "~", "held": "✓", "inconclusive": "?"}.get(ev.status, "-")
        console.print(
            f"{where} {glyph} {ev.status:<12} s{ev.index:04d} ({ev.rate}) {ev.schedule.describe()}",
            highlight=False,
            markup=False,
        )

    return show


def _shrinking(kind: Kind, first: Evaluation) -> None:
    console.print(
        f"shrinking {', '.join(kind) or 'a violation'} (first failing: s{first.index:04d})",
        highlight=False,
        markup=False,
    )


def _exploration_doc(
    found: Exploration, opts: ExploreOptions, confirm: Confirm, seed: int, again: str
) -> dict[str, Any]:
    return {
        "mode": found.mode,
        "budget": opts.budget,
        "seed": seed,
        "confirm": str(confirm),
        "shrink_budget": opts.shrink_budget,
        "command": again,
        "examples_needed": found.examples_needed,
        "trials_run": found.trials_run,
        "trials_to_detection": found.trials_to_detection,
        "schedules": [e.to_json() for e in found.evaluations],
        "finding": None,
        "findings": [],
        "flaky": [],
    }


def _save_findings(
    found: Exploration, doc: dict[str, Any], out: Path, *, seed: int, config: Path | None
) -> None:
    """Each finding beside results.json, with its regression test; flaky ones too. What
    an earlier exploration saved in ``out`` goes first: a finding-3.json left from a run
    that found three would read as this run's."""
    for pattern in (FINDING, REGRESSION, "finding-*.json", "test_crashpoint_finding_*.py"):
        for stale in out.glob(pattern):
            stale.unlink()
    for stale in out.glob("flaky-*.json"):
        stale.unlink()
    section = doc["exploration"]
    by_id = {t["id"]: t for t in doc["trials"]}
    for n, finding in enumerate(found.findings, 1):
        section["findings"].append(_save_finding(finding, n, by_id, out, seed=seed, config=config))
    # The first, where it always was: exploration.finding, finding.json.
    section["finding"] = section["findings"][0] if section["findings"] else None
    for n, ev in enumerate(found.flaky, 1):
        path = save(ev.schedule, out / f"flaky-{n}.json")
        _point_replays(by_id, ev, path)
        section["flaky"].append(
            {**ev.to_json(), "file": path.name, "replay": f"crashpoint replay {path} --repeat 10"}
        )


def _save_finding(
    finding: Finding,
    n: int,
    by_id: dict[str, dict[str, Any]],
    out: Path,
    *,
    seed: int,
    config: Path | None,
) -> dict[str, Any]:
    ev = finding.evaluation
    schedule_name, test_name = finding_files(n)
    path = save(ev.schedule, out / schedule_name)
    test = out / test_name
    test.write_text(
        regression_test(
            ev.schedule,
            filename=test_name,
            invariants=ev.invariants,
            rate=ev.rate,
            seed=seed,
            config=str(config) if config is not None else "reference",
        )
    )
    _point_replays(by_id, ev, path)
    return {
        **ev.to_json(),
        "number": n,
        "kind": list(finding.kind),
        "examples_needed": finding.examples_needed,
        "file": path.name,
        "regression_test": test.name,
        "replay": f"crashpoint replay {path}",
        "shrunk_from": finding.first.to_json(),
    }


def _point_replays(by_id: dict[str, dict[str, Any]], ev: Evaluation, path: Path) -> None:
    for o in ev.outcomes:
        trial = by_id.get(o.trial.get("id", ""))
        if trial is not None:
            trial["replay"] = f"crashpoint replay {path}"


def _print_outcome(found: Exploration, doc: dict[str, Any], out: Path) -> None:
    s = doc["summary"]
    console.print(
        f"{len(found.evaluations)} schedules, {found.trials_run} trials: {s['held']} held, "
        f"{s['violated']} violated, {s['inconclusive']} inconclusive",
        highlight=False,
    )
    if len(found.findings) > 1:
        console.print(
            f"[bold red]{len(found.findings)} findings[/], one per set of invariants broken:"
        )
    for n, finding in enumerate(found.findings, 1):
        ev, first = finding.evaluation, finding.first
        schedule_name, test_name = finding_files(n)
        after = (
            f"after {finding.examples_needed} example(s)"
            if finding.examples_needed is not None
            else "while shrinking another"
        )
        console.print(
            f"[bold red]finding {n}[/] {after}: "
            f"{', '.join(ev.invariants) or 'a violation'} (reproduced {ev.rate})"
        )
        if first is not ev:
            console.print(f"  first failing: {first.schedule.describe()}", markup=False)
        console.print(
            f"  shrunk to {len(ev.schedule.faults)} fault(s): {ev.schedule.describe()}",
            markup=False,
        )
        console.print(
            f"  schedule: {out / schedule_name}; regression test: {out / test_name}",
            markup=False,
        )
        console.print(f"  replay: crashpoint replay {out / schedule_name}", markup=False)
    for ev in found.flaky:
        console.print(
            f"[yellow]flaky[/] (violated {ev.rate}, below the confirm bar): "
            f"{ev.schedule.describe()}"
        )
    if not found.findings and not found.flaky:
        console.print("no finding: every schedule held (or was not decided)")
    console.print(f"report: {out / 'index.html'}", markup=False)
