"""What ``crashpoint run``, ``selftest``, ``demo`` and ``points`` do, behind the click layer."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.contract.errors import ConfigError
from harness.infra import RunInfra
from harness.plan import Cell, cells
from harness.runner import (
    RunSpec,
    exit_code,
    results_document,
    run_cells,
    summarize,
)
from harness.trial import TrialConfig
from harness.verdict import TrialResult
from scenarios.table import BY_NAME, SCENARIOS

console = Console(stderr=True)
if not console.is_terminal:
    # Logs and CI pages are wide; rich's 80-column default would wrap every trial id.
    console = Console(stderr=True, width=160, soft_wrap=True)
GLYPH = {"held": "✓", "violated": "✗", "inconclusive": "?", "skipped": "-"}
STYLE = {"held": "green", "violated": "bold red", "inconclusive": "yellow", "skipped": "dim"}


def select_cells(
    *,
    scenarios: Sequence[str] = (),
    points: Sequence[str] = (),
    providers: Sequence[str] = (),
    signals: Sequence[str] = (),
    ledger: str = "sqlite",
    backend: str = "process",
    mutant: str | None = None,
    shard: str | None = None,
) -> list[Cell]:
    """The cells the filters leave, in table order; unknown names are usage errors."""
    for name in scenarios:
        if name not in BY_NAME:
            raise ConfigError(
                f"--scenario {name!r} is unknown; `crashpoint points` lists the scenarios"
            )
    chosen = [BY_NAME[n] for n in scenarios] if scenarios else list(SCENARIOS)
    known_points = {p for s in chosen for p in s.points}
    for p in points:
        if p not in known_points:
            raise ConfigError(
                f"--point {p!r} is not a point of the chosen scenarios; "
                f"choose from {', '.join(sorted(known_points))}"
            )
    out = cells(
        chosen,
        providers=providers or ("idempotent", "plain", "unqueryable"),
        signals=signals or None,
        ledger=ledger,
        backend=backend,
        mutant=mutant,
    )
    if points:
        out = [c for c in out if c.point in points]
    if shard:
        index, count = parse_shard(shard)
        out = out[index - 1 :: count]
    if not out:
        raise ConfigError("the filters leave no cell to run; `crashpoint points` lists them")
    return out


def parse_shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ConfigError(f"--shard {text!r} must look like i/n, for example 1/4") from None
    if not 1 <= i <= n:
        raise ConfigError(f"--shard {text!r}: i must be between 1 and n")
    return i, n


def trial_config(lease_ttl_s: float | None, pg_dsn: str | None, **extra: Any) -> TrialConfig:
    lease = lease_ttl_s or 0.6
    return TrialConfig(
        lease_ttl_s=lease,
        http_timeout_s=max(0.3, lease),
        pg_dsn=pg_dsn,
        **extra,
    )


def _progress_printer(total: int, label: str) -> tuple[Progress | None, Any]:
    if console.is_terminal:
        bar = Progress(
            TextColumn(f"[bold]{label}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=console,
            transient=True,
        )
        task = bar.add_task("", total=total)

        def advance(r: TrialResult) -> None:
            bar.update(task, advance=1, description=f"{GLYPH[r.verdict]} {r.cell.id}")

        return bar, advance

    done = [0]

    def line(r: TrialResult) -> None:
        done[0] += 1
        console.print(
            f"[{done[0]}/{total}] {GLYPH[r.verdict]} {r.verdict:<12} {r.cell.id} "
            f"({r.duration_s:.2f} s)",
            highlight=False,
        )

    return None, line


def execute(spec: RunSpec, infra: RunInfra, *, label: str) -> list[TrialResult]:
    bar, advance = _progress_printer(len(spec.cells), label)
    if bar is None:
        return run_cells(spec, progress=advance)
    with bar:
        return run_cells(spec, progress=advance)


def write_outputs(doc: dict[str, Any], out: Path) -> Path:
    """results.json first (it is the record), then the report built from it."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    path.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    from reports import load_results, markdown_summary, write_html, write_junit

    # The report is drawn from the stored record, so it shows exactly what was written.
    results = load_results(path)
    write_html(results, out)
    write_junit(results, out / "junit.xml")
    (out / "summary.md").write_text(markdown_summary(results), encoding="utf-8")
    return path


def print_summary(doc: dict[str, Any], out: Path) -> None:
    s = doc["summary"]
    table = Table(title=f"crashpoint {doc['command']} — seed {doc['seed']}", show_lines=False)
    for col in ("trial", "verdict", "violations", "s"):
        table.add_column(col)
    for t in doc["trials"]:
        if t["verdict"] == "held" and s["total"] > 25:
            continue  # long runs list only what needs attention
        table.add_row(
            t["id"],
            f"[{STYLE[t['verdict']]}]{GLYPH[t['verdict']]} {t['verdict']}[/]",
            ", ".join(sorted({v["invariant"] for v in t["violations"]})) or (t["reason"] or ""),
            f"{t['duration_s']:.2f}",
        )
    if table.row_count:
        console.print(table)
    console.print(
        f"{s['total']} trials: [green]{s['held']} held[/], [red]{s['violated']} violated[/], "
        f"[yellow]{s['inconclusive']} inconclusive[/], {s['skipped']} skipped "
        f"in {doc['duration_s']:.1f} s"
    )
    report = out / "index.html"
    where = report if report.exists() else out / "results.json"
    console.print(f"report: {where}")


@dataclass(frozen=True)
class MatrixOptions:
    """The options every matrix command shares (see ``harness.cli``)."""

    scenarios: Sequence[str] = ()
    points: Sequence[str] = ()
    providers: Sequence[str] = ()
    signals: Sequence[str] = ()
    ledger: str = "sqlite"
    backend: str = "process"
    seed: int | None = None
    out: Path = Path("crashpoint-out")
    strict: bool = False
    jobs: int = 1
    shard: str | None = None
    lease_ttl_s: float | None = None
    pg_dsn: str | None = None

    def cells(self, *, mutant: str | None = None) -> list[Cell]:
        return select_cells(
            scenarios=self.scenarios,
            points=self.points,
            providers=self.providers,
            signals=self.signals,
            ledger=self.ledger,
            backend=self.backend,
            mutant=mutant,
            shard=self.shard,
        )


def run_matrix(
    infra: RunInfra,
    cells: Sequence[Cell],
    *,
    seed: int,
    config: TrialConfig,
    command: str,
    jobs: int,
    target: dict[str, Any],
    replay_prefix: Sequence[str] = (),
    label: str | None = None,
) -> dict[str, Any]:
    """Run ``cells`` once and return the results document."""
    spec = infra.spec(cells, seed=seed, config=config, command=command, jobs=jobs, target=target)
    spec.replay_flags = [*replay_prefix, *spec.replay_flags]
    started = time.time()
    results = execute(spec, infra, label=label or command)
    return results_document(spec, results, started=started, environment=infra.environment())


def run_command(
    opts: MatrixOptions,
    *,
    config_path: Path | None,
    target: str,
    mutant: str | None,
    repeat: int = 1,
) -> int:
    command = None
    target_doc: dict[str, Any] = {"name": "reference", "kind": "reference", "mutant": mutant}
    replay: list[str] = []
    if config_path is not None:
        from harness.targets.command import load_config

        command = load_config(config_path)
        if mutant is not None:
            raise ConfigError("--mutant applies to the reference target only, not to -c")
        kind = command.providers[0].kind
        if opts.providers and kind not in opts.providers:
            raise ConfigError(
                f"{config_path}: the provider is {kind}, but --provider asks for "
                f"{', '.join(opts.providers)}"
            )
        opts = replace(opts, providers=(kind,), lease_ttl_s=opts.lease_ttl_s or command.lease_ttl_s)
        target_doc = {"name": command.name, "kind": "command", "mutant": None}
        replay = ["-c", str(config_path)]
    elif target != "reference":
        raise ConfigError(f"--target {target!r} is unknown; use reference or -c crashpoint.toml")
    if mutant is not None:
        from scenarios.mutants import MUTANTS

        if mutant not in MUTANTS:
            raise ConfigError(
                f"--mutant {mutant!r} is unknown; choose from {', '.join(sorted(MUTANTS))}"
            )
    seed = opts.seed if opts.seed is not None else random.randrange(2**31)
    chosen = opts.cells(mutant=mutant)
    config = trial_config(opts.lease_ttl_s, opts.pg_dsn)
    worst = 0
    with RunInfra.open(
        chosen, ledger=opts.ledger, backend=opts.backend, pg_dsn=opts.pg_dsn, command=command
    ) as infra:
        for i in range(repeat):
            doc = run_matrix(
                infra,
                chosen,
                seed=seed + i,
                config=config,
                command="run",
                jobs=opts.jobs,
                target=target_doc,
                replay_prefix=replay,
                label=f"run {i + 1}/{repeat}" if repeat > 1 else "run",
            )
            run_out = opts.out if repeat == 1 else opts.out / f"run-{i + 1:03d}"
            write_outputs(doc, run_out)
            print_summary(doc, run_out)
            worst = max(worst, exit_code(doc["summary"], strict=opts.strict), key=_severity)
    return worst


def _severity(code: int) -> int:
    return {0: 0, 3: 1, 1: 2}.get(code, 3)


def selftest_command(opts: MatrixOptions) -> int:
    """The correct worker must hold every cell; every mutant must be killed by some cell."""
    from harness.killmatrix import kill_matrix, print_kill_matrix
    from scenarios.mutants import MUTANTS

    seed = opts.seed if opts.seed is not None else random.randrange(2**31)
    # One crash signal is enough to tell mutants apart; the full run covers SIGTERM.
    opts = replace(opts, signals=opts.signals or ("SIGKILL", "SIGSTOP"))
    all_cells = opts.cells()
    for name in sorted(MUTANTS):
        all_cells += opts.cells(mutant=name)
    config = trial_config(opts.lease_ttl_s, opts.pg_dsn)
    with RunInfra.open(
        all_cells, ledger=opts.ledger, backend=opts.backend, pg_dsn=opts.pg_dsn
    ) as infra:
        doc = run_matrix(
            infra,
            all_cells,
            seed=seed,
            config=config,
            command="selftest",
            jobs=opts.jobs,
            target={"name": "reference", "kind": "reference", "mutant": None},
        )
    doc["kill_matrix"] = kill_matrix(doc["trials"], MUTANTS)
    write_outputs(doc, opts.out)
    print_kill_matrix(doc, console)
    correct = [t for t in doc["trials"] if t["mutant"] is None]
    survivors = [m for m, row in doc["kill_matrix"]["mutants"].items() if not row["killed"]]
    summary = summarize(correct)
    console.print(f"report: {opts.out / 'index.html'}")
    if summary["violated"] or survivors:
        return 1
    return exit_code(summary, strict=opts.strict)


def demo_command(*, out: Path, seed: int | None, jobs: int) -> int:
    """The full matrix on the embedded default: reference worker, SQLite, processes."""
    seed = seed if seed is not None else random.randrange(2**31)
    opts = MatrixOptions(out=out, seed=seed, jobs=jobs)
    chosen = opts.cells()
    console.print(
        f"crashpoint demo: {len(chosen)} trials of the reference worker on SQLite "
        f"(seed {seed}, {jobs} at a time)"
    )
    with RunInfra.open(chosen, ledger="sqlite", backend="process", pg_dsn=None) as infra:
        doc = run_matrix(
            infra,
            chosen,
            seed=seed,
            config=trial_config(None, None),
            command="demo",
            jobs=jobs,
            target={"name": "reference", "kind": "reference", "mutant": None},
        )
    write_outputs(doc, out)
    print_summary(doc, out)
    return exit_code(doc["summary"], strict=False)


def points_command() -> None:
    table = Table(title="crashpoint injection table")
    for col in ("scenario", "points", "providers", "signals", "expected -> recovery"):
        table.add_column(col)
    for s in SCENARIOS:
        table.add_row(
            s.name,
            "\n".join(s.points),
            ", ".join(s.providers),
            ", ".join(x or "-" for x in s.signals),
            f"{s.expected} -> {s.recovery}",
        )
    Console().print(table)


def replay_file(path: Path, *, trial_ids: Sequence[str], out: Path) -> int:
    """Run again the trials of a stored ``results.json`` (by default those that did not
    hold), each from its own replay command, and say whether each verdict came back."""
    import shlex

    from harness.cli import main

    try:
        doc = json.loads(path.read_text())
        trials = {t["id"]: t for t in doc["trials"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a crashpoint results.json ({exc})") from None
    unknown = [t for t in trial_ids if t not in trials]
    if unknown:
        raise ConfigError(f"{path}: no trial {unknown[0]!r}; trial ids are in its trials[].id")
    chosen = [trials[t] for t in trial_ids] or [
        t for t in trials.values() if t["verdict"] in ("violated", "inconclusive")
    ]
    if not chosen:
        console.print(f"{path}: every trial held or was skipped; nothing to replay")
        return 0
    worst = 0
    for t in chosen:
        args = shlex.split(t["replay"])[1:]
        args += ["--out", str(out / t["id"])]
        console.print(f"replay {t['id']} (was {t['verdict']})")
        try:
            main(args, standalone_mode=False)
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        record = out / t["id"] / "results.json"
        if not record.exists():
            console.print(f"  could not replay (exit {code}); see the message above")
            worst = max(worst, code or 3, key=_severity)
            continue
        again = json.loads(record.read_text())["trials"][0]
        same = again["verdict"] == t["verdict"]
        console.print(
            f"  {'reproduced' if same else 'NOT reproduced'}: {again['verdict']} "
            f"(was {t['verdict']})"
        )
        worst = max(worst, code, key=_severity)
    return worst
