"""The ``crashpoint`` command line's shared options: the stacks of click options the
commands of ``harness.cli`` are declared with, and their completions and types.

Imports only click and the contract, so ``crashpoint --help`` still loads no engine.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import click

from harness.contract.vocabulary import PROVIDER_KINDS

LEDGERS = ("sqlite", "postgres")
BACKENDS = ("process", "docker")
SIGNALS = ("SIGKILL", "SIGTERM", "SIGSTOP")
LANGS = ("python", "node", "go", "shell")

#: One option, or a group of them, in a list given to ``stack``.
Option = Callable[[Any], Any]


def stack(options: Sequence[Option], f: click.decorators.FC) -> click.decorators.FC:
    """Apply ``options`` to ``f`` so that they list in ``--help`` in the order given."""
    out: Any = f
    for option in reversed(options):
        out = option(out)
    return cast("click.decorators.FC", out)


def complete_scenarios(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    from scenarios.table import SCENARIOS

    return [s.name for s in SCENARIOS if s.name.startswith(incomplete)]


def complete_points(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    from scenarios.table import SCENARIOS

    points = dict.fromkeys(p for s in SCENARIOS for p in s.points)
    return [p for p in points if p.startswith(incomplete)]


def complete_mutants(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    from scenarios.mutants import MUTANTS

    return [m for m in MUTANTS if m.startswith(incomplete)]


def out_option(default: str) -> Callable[[click.decorators.FC], click.decorators.FC]:
    return click.option(
        "--out",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path(default),
        metavar="DIR",
        help="Where results.json, index.html, junit.xml, sarif.json go.",
    )


class Jobs(click.ParamType[int | None]):
    """``auto`` (None: the run's default, see harness.run_width) or a number from 1 to 64."""

    name = "jobs"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int | None:
        if value is None or isinstance(value, int):
            return value
        text = str(value).strip().lower()
        if text == "auto":
            return None
        try:
            n = int(text)
        except ValueError:
            self.fail(f"{value!r} is neither auto nor a number of trials", param, ctx)
        if not 1 <= n <= 64:
            self.fail(f"{n} is not from 1 to 64", param, ctx)
        return n


def jobs_option() -> Callable[[click.decorators.FC], click.decorators.FC]:
    return click.option(
        "--jobs",
        "-j",
        type=Jobs(),
        default="auto",
        metavar="N|auto",
        show_default=True,
        help="Trials at once, or auto.",
    )


def strict_default(ctx: click.Context, param: click.Parameter, value: bool | None) -> bool:
    """--strict unless told otherwise where CI=true (every CI service sets it): a gate
    that skipped a cell for a missing server must not pass there as if it had run it."""
    if value is not None:
        return value
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _at_least_one(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    if value is not None and value < 1:
        raise click.BadParameter(f"must be at least 1, got {value}")
    return value


def maxfail_option() -> Callable[[click.decorators.FC], click.decorators.FC]:
    """``-x`` alone is ``--maxfail 1``, as in pytest. A plain int, checked by hand: a
    range type would add a line to run's help, which fills one screen already."""
    return click.option(
        "-x",
        "--maxfail",
        type=int,
        callback=_at_least_one,
        is_flag=False,
        flag_value=1,
        default=None,
        metavar="[N]",
        help="Skip the rest once N trials fail (-x: 1).",
    )


def lease_option() -> Callable[[click.decorators.FC], click.decorators.FC]:
    return click.option(
        "--lease-ttl-s",
        type=click.FloatRange(0.1, 60),
        default=None,
        metavar="SECONDS",
        help="The workers' lease.  [default: the target's]",
    )


def pg_dsn_option(help: str) -> Callable[[click.decorators.FC], click.decorators.FC]:
    return click.option(
        "--pg-dsn",
        envvar="CRASHPOINT_PG_DSN",
        show_envvar=True,
        default=None,
        metavar="DSN",
        help=help,
    )


def config_option(help: str) -> Callable[[click.decorators.FC], click.decorators.FC]:
    return click.option(
        "-c",
        "--config",
        "config_path",
        type=click.Path(path_type=Path),
        default=None,
        metavar="FILE",
        help=help,
    )


def backend_option() -> Callable[[click.decorators.FC], click.decorators.FC]:
    return click.option(
        "--backend",
        type=click.Choice(BACKENDS),
        default="process",
        help="Local processes, or containers.",
    )


def _selection_options(f: click.decorators.FC) -> click.decorators.FC:
    """Which cells of the matrix: scenario, point, provider, signal."""
    options = [
        click.option(
            "--scenario",
            "scenarios",
            multiple=True,
            metavar="NAME",
            shell_complete=complete_scenarios,
            help="Only this scenario (repeatable; see points).",
        ),
        click.option(
            "--point",
            "points",
            multiple=True,
            metavar="NAME",
            shell_complete=complete_points,
            help="Only this injection point (repeatable).",
        ),
        click.option(
            "--provider",
            "providers",
            multiple=True,
            metavar="KIND|NAME",
            help=f"Only this provider kind ({', '.join(PROVIDER_KINDS)}), or a declared name.",
        ),
        click.option(
            "--signal",
            "signals",
            multiple=True,
            type=click.Choice(SIGNALS),
            metavar="SIG",
            help="Only this signal: SIGKILL, SIGTERM or SIGSTOP.",
        ),
    ]
    return stack(options, f)


def _gate_options(f: click.decorators.FC) -> click.decorators.FC:
    """Where the report goes and what exits non-zero: out, strict, fail-on-warning."""
    options = [
        out_option("crashpoint-out"),
        click.option(
            "--strict/--no-strict",
            default=None,
            callback=strict_default,
            help="Exit 3 on skipped trials too (on where CI=true).",
        ),
        click.option(
            "--fail-on-warning",
            is_flag=True,
            help="Exit 1 on warnings too.",
        ),
    ]
    return stack(options, f)


def matrix_options(f: click.decorators.FC) -> click.decorators.FC:
    """The options every matrix command shares (run, selftest): see commands/matrix.py."""
    options: list[Option] = [
        _selection_options,
        click.option(
            "--ledger",
            type=click.Choice(LEDGERS),
            default="sqlite",
            help="The reference worker's ledger store.",
        ),
        backend_option(),
        click.option(
            "--seed",
            type=int,
            default=None,
            metavar="N",
            help="Seed of the run, for replay.  [default: random]",
        ),
        _gate_options,
        jobs_option(),
        click.option(
            "--shard",
            default=None,
            metavar="I/N",
            help="Run shard I of N; auto/N: JOB_COMPLETION_INDEX.",
        ),
        lease_option(),
        pg_dsn_option("PostgreSQL for --ledger postgres.  [default: the install script's]"),
    ]
    return stack(options, f)


def target_options(f: click.decorators.FC) -> click.decorators.FC:
    """Which worker: -c FILE, --target NAME or --mutant NAME (commands/target.py)."""
    options = [
        config_option("Your worker's crashpoint.toml."),
        click.option(
            "--target",
            default=None,
            metavar="NAME",
            help="reference: the built-in worker.  [default: ./crashpoint.toml]",
        ),
        click.option(
            "--mutant",
            default=None,
            metavar="NAME",
            shell_complete=complete_mutants,
            help="Plant this bug in the reference worker.",
        ),
    ]
    return stack(options, f)


def _explore_search_options(f: click.decorators.FC) -> click.decorators.FC:
    """How explore searches: budget, seed, out, mode, confirmation, shrinking."""
    options = [
        click.option(
            "--budget",
            type=click.IntRange(1, 100_000),
            required=True,
            metavar="N",
            help="Schedules to generate, past the first bug (shrinking on top).",
        ),
        click.option(
            "--seed",
            type=int,
            default=None,
            metavar="N",
            help="Seed: the same seed, the same schedules.",
        ),
        out_option("crashpoint-explore"),
        click.option(
            "--mode",
            type=click.Choice(("hypothesis", "random")),
            default="hypothesis",
            help="Hypothesis schedules, or kills at random moments (the chaos baseline).",
        ),
        click.option(
            "--confirm",
            default="2/3",
            metavar="K/N",
            help="A schedule fails when K of up to N runs violate; fewer is flaky.",
        ),
        click.option(
            "--shrink-budget",
            type=click.IntRange(0, 10_000),
            default=60,
            metavar="TRIALS",
            help="Trials shrinking may spend on each finding.",
        ),
    ]
    return stack(options, f)


def explore_options(f: click.decorators.FC) -> click.decorators.FC:
    """Every option of ``crashpoint explore`` but the target's."""
    options: list[Option] = [
        _explore_search_options,
        click.option(
            "--network", is_flag=True, help="Also draw Toxiproxy toxics (needs Toxiproxy)."
        ),
        click.option(
            "--db",
            type=click.Path(file_okay=False, path_type=Path),
            envvar="CRASHPOINT_EXPLORE_DB",
            default=None,
            metavar="DIR",
            help="Hypothesis's database, shared by shards.",
        ),
        click.option(
            "--ledger", type=click.Choice(LEDGERS), default="sqlite", help="The ledger store."
        ),
        backend_option(),
        lease_option(),
        pg_dsn_option("PostgreSQL for --ledger postgres."),
    ]
    return stack(options, f)


def replay_options(f: click.decorators.FC) -> click.decorators.FC:
    """What ``crashpoint replay`` replays: trials, tries of a schedule, which worker."""
    options = [
        click.option(
            "--trial",
            "trial_ids",
            multiple=True,
            metavar="ID",
            help="Replay this trial id (repeatable).  [default: every trial that did not hold]",
        ),
        click.option(
            "--repeat",
            type=click.IntRange(1, 1000),
            default=None,
            metavar="N",
            help="A schedule file: play it N times and report the reproduction rate; exit 1 "
            "when it reproduced at least once, 0 when never, 3 when no try was decided.  "
            "[default: 5]",
        ),
        click.option(
            "--correct",
            is_flag=True,
            help="A schedule file: play it against the correct reference worker, not its mutant.",
        ),
    ]
    return stack(options, f)


def init_options(f: click.decorators.FC) -> click.decorators.FC:
    """What ``crashpoint init`` writes: language, overwrite, where, which providers."""
    options = [
        click.option(
            "--lang",
            type=click.Choice(LANGS),
            default=None,
            help="The worker's language.  [default: guessed from the files here]",
        ),
        click.option("--force", is_flag=True, help="Overwrite files that already exist."),
        click.option(
            "--pyproject",
            is_flag=True,
            help="Add a [tool.crashpoint] table to ./pyproject.toml instead of crashpoint.toml.",
        ),
        click.option(
            "--provider",
            "providers",
            multiple=True,
            metavar="[NAME=]KIND",
            help="A [[providers]] block of this kind or persona (stripe, slack, sendgrid, "
            "resend, github, openai), with its SDK's base-URL line; repeat for more.  "
            "[default: idempotent]",
        ),
    ]
    return stack(options, f)


def check_config_options(f: click.decorators.FC) -> click.decorators.FC:
    """Which configuration ``crashpoint check-config`` checks, and how long it waits."""
    options = [
        config_option("The configuration.  [default: ./crashpoint.toml, else ./pyproject.toml]"),
        click.option(
            "--timeout-s",
            type=click.FloatRange(1, 600),
            default=15.0,
            metavar="SECONDS",
            help="How long to wait for the job to finish.",
        ),
    ]
    return stack(options, f)
