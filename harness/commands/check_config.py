"""``crashpoint check-config``: check a ``crashpoint.toml`` and the worker's wiring before
any fault is injected.

It loads the configuration (every schema error is one line, exit 2), refuses values
``crashpoint init`` left in ``<angle brackets>``, then starts a real provider for every
``[[providers]]`` entry, enqueues one job, starts one worker and watches: did a request
reach the provider (the worker read its URL), did a failpoint line arrive (and at which
points), does the ``status`` command say done, how many effects did the job make. Each
finding is a line with a check mark or a cross and what to fix, because a worker that
never reads its URL or never calls a failpoint otherwise shows up only as a wall of
``inconclusive`` trials.

Watching (``check_watch.py``) and judging (``check_findings.py``) are apart: ``judge``
turns a ``Seen`` into lines without any I/O, so every message is unit-tested.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness.backends.zygote import cold_reason, interpreter_of
from harness.commands.check_findings import judge, wire
from harness.commands.check_lines import FAIL, GLYPHS, OK, WARN, Line
from harness.commands.check_watch import watch
from harness.commands.console import stdout
from harness.commands.init_plan import FIRST_SCENARIO, PLACEHOLDER
from harness.contract.vocabulary import ExitCode
from harness.targets.command_lifecycle import declared_note
from harness.targets.config import CommandConfig, find_config, load_config


def check_config_command(
    path: Path | None, *, timeout_s: float, console: Console | None = None
) -> int:
    """Check the configuration, start the worker once, print one line per finding."""
    console = console or stdout
    config = load_config(path if path is not None else find_config(Path.cwd()))
    console.print(
        f"crashpoint check-config: {_shown_path(config.path)} (target {config.name!r})",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    static = static_lines(config)
    if any(line.mark == FAIL for line in static):
        return report_lines(console, static, config)
    seen = watch(config, timeout_s=timeout_s)
    return report_lines(console, [*static, *judge(seen)], config)


def static_lines(config: CommandConfig) -> list[Line]:
    """What can be said without starting anything: placeholders, programs that exist."""
    lines = []
    for key, argv in _argvs(config):
        todo = [a for a in argv if PLACEHOLDER.match(a)]
        if todo:
            lines.append(
                Line(
                    FAIL,
                    f"target.{key} still holds the placeholder {todo[0]}",
                    f"replace it in {_shown_path(config.path)}; the comment above the key "
                    "says what goes there",
                )
            )
            continue
        if _program(config, argv[0]) is None:
            lines.append(
                Line(
                    FAIL,
                    f"target.{key}: no program {argv[0]!r} beside {config.path.name} or on PATH",
                    "install it, or fix the name"
                    + (" (build it first: go build -o worker .)" if argv[0] == "./worker" else ""),
                )
            )
    if not lines:
        names = ", ".join(
            f"{p.name} ({wire(p)}{', over MCP' if p.transport == 'mcp' else ''})"
            for p in config.providers
        )
        lines.append(Line(OK, f"configuration is valid: providers {names}"))
        declared = declared_note(config)
        lines += [Line(OK, declared)] if declared is not None else []
        lines += _preload_lines(config)
    return lines


def _preload_lines(config: CommandConfig) -> list[Line]:
    """What ``[target.preload]`` will do for ``command`` (nothing, when a fork cannot
    stand in for its start)."""
    if not config.preload:
        return []
    said = f"target.preload: {', '.join(config.preload)} imported once per run"
    interpreter = interpreter_of(config.command, config.base_dir)
    why = (
        f"{config.command[0]!r} is not on PATH"
        if interpreter is None
        else cold_reason(
            [interpreter, *config.command[1:]],
            os.environ,
            cwd=config.base_dir,
            interpreter=interpreter,
            zygote_env=os.environ,
        )
    )
    if why is None:
        return [Line(OK, f"{said}; each worker is forked from it")]
    fix = 'write command = ["python3", "worker.py"], or remove [target.preload]'
    return [Line(WARN, f"{said}, but every worker starts cold: {why}", fix)]


def report_lines(console: Console, lines: Sequence[Line], config: CommandConfig) -> int:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")  # wrapped text stays right of its mark
    for line in lines:
        glyph, style = GLYPHS[line.mark]
        text = Text(line.text)
        if line.fix and line.mark in (FAIL, WARN):
            text.append(f"\nfix: {line.fix}", style="yellow")
        grid.add_row(Text(glyph, style=style), text)
    console.print(grid)
    problems = sum(1 for line in lines if line.mark == FAIL)
    warnings = sum(1 for line in lines if line.mark == WARN)
    if problems:
        console.print(f"{problems} problem(s); fix them and run check-config again", markup=False)
        return ExitCode.USAGE
    if warnings:
        console.print(f"{warnings} warning(s); a run works, but see above", markup=False)
    console.print(
        f"ready: crashpoint run -c {_shown_path(config.path)} --scenario {FIRST_SCENARIO}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return ExitCode.HELD


def _argvs(config: CommandConfig) -> list[tuple[str, tuple[str, ...]]]:
    out = [("command", config.command), ("enqueue", config.enqueue)]
    more = ("status", config.status), ("upgraded_command", config.upgraded_command)
    return out + [(k, a) for k, a in (*more, ("cancel", config.cancel)) if a is not None]


def _program(config: CommandConfig, program: str) -> str | None:
    """Where ``program`` is found the way the worker's start finds it (beside, then PATH)."""
    beside = config.base_dir / program
    if beside.is_file():
        return str(beside)
    return shutil.which(program)


def _shown_path(path: Path) -> str:
    """``path`` as the user would type it here: relative below the working directory."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
