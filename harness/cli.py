"""The ``crashpoint`` command line: click options and arguments only.

What each command does is in ``harness.commands``, imported when the command runs, so
``crashpoint --help`` loads no engine. Exit codes (stable, ``ExitCode``): 0 all held;
1 a violation; 2 usage or configuration error; 3 inconclusive or infrastructure failure
(``--strict``: skipped too); 130 interrupted.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from harness.contract.errors import ConfigError, CrashpointError
from harness.contract.vocabulary import PROVIDER_KINDS, ExitCode
from harness.contract.vocabulary import VERSION as __version__

LEDGERS = ("sqlite", "postgres")
BACKENDS = ("process", "docker")
SIGNALS = ("SIGKILL", "SIGTERM", "SIGSTOP")
#: 128 + SIGINT, as a shell reports a command stopped by Ctrl-C.
INTERRUPTED = 130


class _Group(click.Group):
    """Turns crashpoint's own errors into one line and the documented exit code."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            click.echo(f"crashpoint: {exc}", err=True)
            sys.exit(ExitCode.USAGE)
        except CrashpointError as exc:  # InfrastructureError and every other of ours
            click.echo(f"crashpoint: {exc}", err=True)
            sys.exit(ExitCode.INCONCLUSIVE)
        except KeyboardInterrupt:
            click.echo("crashpoint: interrupted; every worker and server was stopped", err=True)
            sys.exit(INTERRUPTED)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="crashpoint")
def main() -> None:
    """Prove that a job worker produces each side effect exactly once."""


def _matrix_options(f: click.decorators.FC) -> click.decorators.FC:
    options = [
        click.option("--scenario", "scenarios", multiple=True, help="Only this scenario."),
        click.option("--point", "points", multiple=True, help="Only this injection point."),
        click.option(
            "--provider",
            "providers",
            multiple=True,
            help=f"Only this provider kind ({', '.join(PROVIDER_KINDS)}), or a declared name.",
        ),
        click.option(
            "--signal", "signals", multiple=True, type=click.Choice(SIGNALS), help="Only this."
        ),
        click.option("--ledger", type=click.Choice(LEDGERS), default="sqlite", show_default=True),
        click.option(
            "--backend", type=click.Choice(BACKENDS), default="process", show_default=True
        ),
        click.option("--seed", type=int, default=None, help="Run seed (default: random)."),
        click.option(
            "--out",
            type=click.Path(file_okay=False, path_type=Path),
            default=Path("crashpoint-out"),
            show_default=True,
        ),
        click.option("--strict", is_flag=True, help="Fail (exit 3) on skipped trials too."),
        click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True),
        click.option("--shard", default=None, help="Run shard i/n of the cells (e.g. 1/4)."),
        click.option("--lease-ttl-s", type=click.FloatRange(0.1, 60), default=None),
        click.option("--pg-dsn", envvar="CRASHPOINT_PG_DSN", default=None),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@main.command()
@click.option("-c", "--config", "config_path", type=click.Path(path_type=Path), default=None)
@click.option("--target", default="reference", show_default=True)
@click.option("--mutant", default=None, help="Run the reference worker with this bug.")
@click.option(
    "--repeat", type=click.IntRange(1, 1000), default=1, show_default=True, help="Whole runs."
)
@_matrix_options
def run(config_path: Path | None, target: str, mutant: str | None, repeat: int, **kw: Any) -> None:
    """Run the injection matrix against a target and write results.json and a report."""
    from harness.commands.matrix import MatrixOptions
    from harness.commands.run import run_command

    opts = MatrixOptions(**kw)
    sys.exit(
        run_command(opts, config_path=config_path, target=target, mutant=mutant, repeat=repeat)
    )


@main.command()
@_matrix_options
def selftest(**kw: Any) -> None:
    """Run the correct reference worker and every mutant; print the kill matrix."""
    from harness.commands.matrix import MatrixOptions
    from harness.commands.selftest import selftest_command

    sys.exit(selftest_command(MatrixOptions(**kw)))


@main.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("crashpoint-demo"),
    show_default=True,
)
@click.option("--seed", type=int, default=None)
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=2, show_default=True)
def demo(out: Path, seed: int | None, jobs: int) -> None:
    """Run the full matrix on the embedded default and write the HTML report."""
    from harness.commands.demo import demo_command

    sys.exit(demo_command(out=out, seed=seed, jobs=jobs))


@main.command()
def points() -> None:
    """List the scenarios, their injection points, providers and signals."""
    from harness.commands.points import points_command

    points_command()


@main.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Directory."
)
@click.option(
    "--self-contained", is_flag=True, help="Write one self-contained index.html instead of pages."
)
def report(results: tuple[Path, ...], out: Path, self_contained: bool) -> None:
    """Merge results.json files (shards) and regenerate the HTML, JUnit and Markdown."""
    from harness.commands.report import report_command

    report_command(results, out=out, self_contained=self_contained)


@main.command()
@click.argument("results", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--trial", "trial_ids", multiple=True, help="Trial id (default: all not held).")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("crashpoint-replay"),
    show_default=True,
)
def replay(results: Path, trial_ids: tuple[str, ...], out: Path) -> None:
    """Run trials of a results.json again from their seeds and compare the verdicts."""
    from harness.commands.replay import replay_file

    sys.exit(replay_file(results, trial_ids=trial_ids, out=out))


@main.command()
def doctor() -> None:
    """Say what is available here and how to get what is missing."""
    from harness.commands.doctor import run_doctor

    sys.exit(run_doctor())


@main.group()
def provider() -> None:
    """Fake providers: run one in the foreground."""


def _register_provider_serve() -> None:
    from fake_providers.cli import serve

    provider.add_command(serve)


_register_provider_serve()
