"""Every command and option of ``crashpoint`` explains itself, and ``COMMAND --help``
fits one screen; shell completion comes from click."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from harness.cli import main
from scenarios.table import SCENARIOS

#: One screen: what an 80x40 terminal shows without scrolling.
SCREEN_LINES = 40
SCREEN_COLUMNS = 80


def commands(
    group: click.Group = main, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command under ``group``, groups included, with the words that reach it."""
    ctx = click.Context(group, info_name="crashpoint")
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))


ALL = list(commands())
IDS = [" ".join(path) for path, _ in ALL]


def help_text(*args: str) -> str:
    result = CliRunner().invoke(
        main, [*args, "--help"], prog_name="crashpoint", terminal_width=SCREEN_COLUMNS
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_the_tree_is_walked() -> None:
    assert {"run", "init", "check-config", "points", "provider serve"} <= set(IDS)


@pytest.mark.parametrize(("path", "command"), ALL, ids=IDS)
def test_every_option_has_help(path: tuple[str, ...], command: click.Command) -> None:
    for param in command.params:
        if isinstance(param, click.Option):
            assert (param.help or "").strip(), f"crashpoint {' '.join(path)} {param.opts[0]}"


@pytest.mark.parametrize(("path", "command"), ALL, ids=IDS)
def test_every_argument_is_described_in_the_command_help(
    path: tuple[str, ...], command: click.Command
) -> None:
    # click arguments take no help=; pip and pytest describe them in the command's text.
    for param in command.params:
        if isinstance(param, click.Argument):
            assert param.human_readable_name in (command.help or ""), (path, param.name)


@pytest.mark.parametrize(("path", "command"), ALL, ids=IDS)
def test_every_command_has_a_one_line_short_help(
    path: tuple[str, ...], command: click.Command
) -> None:
    short = command.get_short_help_str(limit=1000)
    assert short.strip(), path
    assert "\n" not in short
    # ... and the listing of its group shows it whole, at 80 columns.
    listing = help_text(*path[:-1])
    line = next(ln for ln in listing.splitlines() if ln.split()[:1] == [path[-1]])
    assert not line.rstrip().endswith("..."), line


@pytest.mark.parametrize(("path", "command"), ALL, ids=IDS)
def test_help_fits_one_screen(path: tuple[str, ...], command: click.Command) -> None:
    text = help_text(*path)
    assert len(text.splitlines()) <= SCREEN_LINES, text
    assert max(len(line) for line in text.splitlines()) <= SCREEN_COLUMNS, text


@pytest.mark.parametrize(("path", "command"), ALL, ids=IDS)
def test_defaults_are_shown(path: tuple[str, ...], command: click.Command) -> None:
    ctx = click.Context(command, info_name=path[-1], show_default=True)
    for param in command.params:
        if not isinstance(param, click.Option) or param.is_flag or param.multiple:
            continue
        if param.required or param.get_default(ctx, call=False) is None:
            continue  # no default to show (the help text says what happens without it)
        record = param.get_help_record(ctx)
        assert record is not None
        assert "default:" in record[1], (path, param.opts[0], record)


def test_run_help_explains_the_options_the_issue_found_bare() -> None:
    text = help_text("run")
    for option, words in {
        "--config": "crashpoint.toml",
        "--target": "built-in worker",
        "--out": "results.json",
        "--ledger": "ledger store",
        "--backend": "containers",
        "--lease-ttl-s": "lease",
        "--pg-dsn": "PostgreSQL",
    }.items():
        line = next(ln for ln in text.splitlines() if option in ln)
        assert words in line, line


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_completion_script_is_produced(shell: str) -> None:
    result = CliRunner().invoke(
        main, [], prog_name="crashpoint", env={"_CRASHPOINT_COMPLETE": f"{shell}_source"}
    )
    assert result.exit_code == 0
    assert "_CRASHPOINT_COMPLETE" in result.output
    assert "crashpoint" in result.output


def test_completion_offers_scenario_names() -> None:
    result = CliRunner().invoke(
        main,
        [],
        prog_name="crashpoint",
        env={
            "_CRASHPOINT_COMPLETE": "bash_complete",
            "COMP_WORDS": "crashpoint run --scenario crash_",
            "COMP_CWORD": "3",
        },
    )
    assert result.exit_code == 0
    offered = {line.split(",", 1)[1] for line in result.output.splitlines() if "," in line}
    assert offered == {s.name for s in SCENARIOS if s.name.startswith("crash_")}
