"""The ``crashpoint`` command line: click options and arguments only.

What each command does is in ``harness.commands``, imported when the command runs, so
``crashpoint --help`` loads no engine. Exit codes (stable, ``ExitCode``): 0 all held;
1 a violation; 2 usage or configuration error; 3 inconclusive or infrastructure failure
(``--strict``: skipped too; ``--fail-on-warning``: 1 on a warning); 130 interrupted.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import click

from harness.cli_options import (
    check_config_options,
    explore_options,
    init_options,
    jobs_option,
    matrix_options,
    maxfail_option,
    out_option,
    replay_options,
    target_options,
)
from harness.contract.errors import ConfigError, CrashpointError, Terminated
from harness.contract.vocabulary import VERSION as __version__
from harness.contract.vocabulary import ExitCode

#: 128 + SIGINT, as a shell reports a command stopped by Ctrl-C; 128 + SIGTERM.
INTERRUPTED = 130
TERMINATED = 143


class _Group(click.Group):
    """Turns crashpoint's own errors into one line and the documented exit code."""

    def invoke(self, ctx: click.Context) -> object:
        # SIGTERM (a CI job cancelled, a container stopped) is taken as Ctrl-C: the same
        # teardown runs, and a run writes the report of the trials that finished.
        signal.signal(signal.SIGTERM, _terminated)
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            click.echo(f"crashpoint: {exc}", err=True)
            sys.exit(ExitCode.USAGE)
        except CrashpointError as exc:  # InfrastructureError and every other of ours
            click.echo(f"crashpoint: {exc}", err=True)
            sys.exit(ExitCode.INCONCLUSIVE)
        except KeyboardInterrupt as stop:
            click.echo("crashpoint: interrupted; every worker and server was stopped", err=True)
            sys.exit(TERMINATED if isinstance(stop, Terminated) else INTERRUPTED)


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
    epilog="Start with `crashpoint demo`; for your own worker, `crashpoint init`. "
    "`crashpoint COMMAND -h` explains each command.",
)
@click.version_option(__version__, prog_name="crashpoint")
def main() -> None:
    """Prove that a job worker produces each side effect exactly once.

    Exit codes: 0 all held, 1 a violation, 2 usage or configuration error, 3 inconclusive
    or missing infrastructure, 130 interrupted.
    """


@main.command(
    epilog="\b\nExamples:\n"
    "  crashpoint run --scenario crash_after_external_success --seed 7\n"
    "  crashpoint run --mutant fresh_key_per_attempt     # a known bug: exit 1\n"
    "  crashpoint run -c crashpoint.toml -j 2"
)
@target_options
@click.option(
    "--repeat",
    type=click.IntRange(1, 1000),
    default=1,
    metavar="N",
    help="Run the cells N times.",
)
@click.option(
    "--keep-state",
    is_flag=True,
    help="Keep the state of trials not held (OUT/state).",
)
@maxfail_option()
@matrix_options
def run(
    config_path: Path | None,
    target: str | None,
    mutant: str | None,
    repeat: int,
    keep_state: bool,
    maxfail: int | None,
    **kw: Any,
) -> None:
    """Run the injection matrix on a worker; write a report.

    Each cell (scenario x point x provider x signal) is one trial.
    """
    from harness.commands.matrix import MatrixOptions
    from harness.commands.run import run_command

    opts = MatrixOptions(**kw)
    sys.exit(
        run_command(
            opts,
            config_path=config_path,
            target=target,
            mutant=mutant,
            repeat=repeat,
            keep_state=keep_state,
            maxfail=maxfail,
        )
    )


@main.command(
    epilog="\b\nExamples:\n"
    "  crashpoint selftest              # each mutant until it is caught\n"
    "  crashpoint selftest --full       # every cell of every mutant"
)
@click.option(
    "--full",
    is_flag=True,
    help="Run every cell of every mutant, not only until each is caught: the complete kill matrix.",
)
@matrix_options
def selftest(full: bool, **kw: Any) -> None:
    """Run the reference worker and every mutant: kill matrix.

    Exit 0 when the correct worker holds every cell and each mutant is caught by at
    least one: the harness is only as good as the bugs it catches. The correct worker
    runs every cell; a mutant caught by the invariant it predicts runs no more of its
    cells (they are reported skipped) unless --full.
    """
    from harness.commands.matrix import MatrixOptions
    from harness.commands.selftest import selftest_command

    sys.exit(selftest_command(MatrixOptions(**kw), full=full))


@main.command()
@out_option("crashpoint-demo")
@click.option(
    "--seed", type=int, default=None, metavar="N", help="Seed of the run.  [default: random]"
)
@jobs_option()
def demo(out: Path, seed: int | None, jobs: int | None) -> None:
    """Run every cell on the reference worker; HTML report.

    Needs nothing beyond Python: SQLite ledger, local processes; network scenarios are
    skipped without Toxiproxy.
    """
    from harness.commands.demo import demo_command

    sys.exit(demo_command(out=out, seed=seed, jobs=jobs))


@main.command()
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the table as JSON: every field of every scenario.",
)
def points(as_json: bool) -> None:
    """List the scenarios and their injection points.

    With their provider kinds, signals, expected result and recovery; the names are
    what --scenario and --point take.
    """
    from harness.commands.points import points_command

    points_command(as_json=as_json)


@main.command(
    epilog="\b\nExample:\n  crashpoint report shard1/results.json shard2/results.json --out all"
)
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    metavar="DIR",
    help="Where the merged results.json and report go.",
)
@click.option(
    "--self-contained", is_flag=True, help="Write one self-contained index.html instead of pages."
)
def report(results: tuple[Path, ...], out: Path, self_contained: bool) -> None:
    """Merge results.json files; write the report again.

    RESULTS are results.json files (shards of one run, or repeated runs); the HTML,
    JUnit and Markdown are written from the merge.
    """
    from harness.commands.report import report_command

    report_command(results, out=out, self_contained=self_contained)


@main.command(
    epilog="\b\nExamples:\n"
    "  crashpoint replay crashpoint-out/results.json\n"
    "  crashpoint replay crashpoint-explore/finding.json   # 5 tries: a rate\n"
    "  crashpoint replay finding.json --repeat 20\n"
    "  crashpoint replay finding.json --correct     # against the correct worker"
)
@click.argument("results", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@replay_options
@target_options
@out_option("crashpoint-replay")
def replay(
    results: Path,
    trial_ids: tuple[str, ...],
    repeat: int | None,
    correct: bool,
    out: Path,
    config_path: Path | None,
    target: str | None,
    mutant: str | None,
) -> None:
    """Run stored trials or a saved schedule again; compare verdicts.

    RESULTS is a results.json (each of its trials carries the command that replays
    it) or a schedule file (finding.json from crashpoint explore), played against the
    target it was found against unless -c, --mutant or --correct say otherwise, or a
    bundle (crashpoint bundle): its hash checked, what differs here said, then replayed.
    """
    from harness.commands.bundle import is_bundle_file, replay_bundle
    from harness.commands.replay import DEFAULT_REPEAT, replay_file, replay_schedule
    from harness.schedule import is_schedule_file

    if is_bundle_file(results):
        sys.exit(replay_bundle(results, out=out, repeat=repeat or DEFAULT_REPEAT))
    if is_schedule_file(results):
        sys.exit(
            replay_schedule(
                results,
                repeat=repeat or DEFAULT_REPEAT,
                out=out,
                config_path=config_path,
                target=target,
                mutant=mutant,
                correct=correct,
            )
        )
    sys.exit(replay_file(results, trial_ids=trial_ids, out=out))


@main.command(
    epilog="\b\nExamples:\n"
    "  crashpoint bundle crashpoint-out/results.json --out finding.bundle.json\n"
    "  crashpoint bundle crashpoint-explore/finding.json --out finding.bundle.json\n"
    "  crashpoint replay finding.bundle.json"
)
@click.argument("source", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--trial",
    "trial_id",
    default=None,
    metavar="ID",
    help="The trial of a results.json to pack.  [default: its first violated trial]",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("crashpoint-bundle.json"),
    show_default=True,
    metavar="FILE",
    help="The bundle to write.",
)
def bundle(source: Path, trial_id: str | None, out: Path) -> None:
    """Pack a finding or a violated trial into one portable file.

    SOURCE is a results.json or a schedule file (finding.json from crashpoint explore).
    The bundle holds the trial (its replay line and history) or the schedule, the
    target's config, the versions it ran with, and a hash of it all;
    `crashpoint replay BUNDLE` checks the hash, says what differs here and replays it.
    """
    from harness.commands.bundle import make_bundle

    make_bundle(source, trial_id=trial_id, out=out)


@main.command(
    epilog="\b\nExamples:\n"
    "  crashpoint explore --budget 50 --seed 1 --mutant fresh_key_per_attempt\n"
    "  crashpoint explore --budget 200 --seed 7 -c crashpoint.toml\n"
    "  crashpoint explore --budget 50 --seed 1 --mode random   # the chaos baseline"
)
@target_options
@explore_options
def explore(config_path: Path | None, target: str | None, mutant: str | None, **kw: Any) -> None:
    """Search fault schedules with Hypothesis; shrink what fails.

    Each schedule (jobs, workers, then faults at boundaries) is one real trial judged
    by the oracle. Each set of invariants broken is a finding of its own, saved as
    finding.json (then finding-2.json, ...) beside results.json, with a pytest
    regression test; exit 1 on a finding (flaky ones too).
    """
    from harness.commands.explore import ExploreOptions, explore_command

    opts = ExploreOptions(**kw)
    sys.exit(explore_command(opts, config_path=config_path, target=target, mutant=mutant))


@main.command()
@click.argument("results", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Also write the re-judged results.json and report here.",
)
def recheck(results: Path, out: Path | None) -> None:
    """Judge stored histories again with today's oracle.

    Nothing is rerun: each trial's stored events and facts in RESULTS (a
    results.json) go to the oracle, and the trials whose verdict changes are listed.
    Exit code as for the new verdicts.
    """
    from harness.commands.recheck import recheck_command

    sys.exit(recheck_command(results, out=out))


@main.command()
def doctor() -> None:
    """Say what is here and how to get what is missing."""
    from harness.commands.doctor import run_doctor

    sys.exit(run_doctor())


@main.command(epilog="\b\nExample:\n  cd my-worker && crashpoint init --lang node")
@init_options
def init(lang: str | None, force: bool, pyproject: bool, providers: tuple[str, ...]) -> None:
    """Write a commented crashpoint.toml for the worker here.

    Also copies the failpoint client for its language beside it and prints the
    commands to run next. Values it cannot guess are left in <angle brackets>.
    """
    from harness.commands.init import init_command

    sys.exit(
        init_command(Path.cwd(), lang=lang, force=force, pyproject=pyproject, providers=providers)
    )


@main.command("check-config")
@check_config_options
def check_config(config_path: Path | None, timeout_s: float) -> None:
    """Check a configuration by starting its worker once.

    Before any fault is injected, starts a fake provider for each [[providers]]
    entry, enqueues one job and says whether the worker read its provider URL, used
    the failpoint socket, reported the job's outcome and made exactly one effect.
    Exit 0 when all is well, 2 otherwise.
    """
    from harness.commands.check_config import check_config_command

    sys.exit(check_config_command(config_path, timeout_s=timeout_s))


@main.group()
def provider() -> None:
    """Run one fake provider in the foreground."""


def _register_provider_serve() -> None:
    from fake_providers.cli import serve

    # Its docstring's first sentence is cut in the 80-column listing; this one fits.
    serve.short_help = "Serve one provider until SIGTERM; prints its URL."
    provider.add_command(serve)


_register_provider_serve()
