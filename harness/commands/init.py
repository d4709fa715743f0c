"""``crashpoint init``: a commented ``crashpoint.toml`` (or a ``[tool.crashpoint]`` table
in ``pyproject.toml``) for the worker in a directory, the failpoint client for its
language beside it, and the commands to run next.

What can be guessed from the directory is (``worker.js`` and ``package.json`` for Node,
``*.py`` for Python, ``go.mod`` for Go, the provider name the worker already reads);
what cannot is left as a value in ``<angle brackets>``, which ``check-config`` refuses
by name. Nothing is ever overwritten without ``--force``: a user's file is worth more
than a template.

The clients are the files in ``harness/templates/`` (``examples/failpoint-clients/``
links to them), and Python's is ``harness/contract/failpoint.py`` made standalone, so
what init copies is always the tested client.
"""

from __future__ import annotations

import json
import re
import string
import textwrap
import tomllib
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from harness.commands.console import stdout
from harness.commands.init_plan import (
    DEFAULT_LANG,
    FIRST_SCENARIO,
    LANG_NAMES,
    SOURCE_SUFFIXES,
    Plan,
    guess_lang,
    plan,
    runner,
    templates,
)
from harness.contract import env
from harness.contract.errors import ConfigError
from harness.contract.vocabulary import DECLARED, PERSONA_KINDS, PROVIDER_KINDS
from harness.targets.config import CONFIG_FILE, PYPROJECT
from harness.targets.personas import GUIDES, base_url_line, sdk_env


def render(p: Plan, *, prefix: str = "") -> str:
    """The configuration text; ``prefix`` is ``tool.crashpoint.`` inside pyproject.toml."""
    text = (templates() / "crashpoint.toml.in").read_text(encoding="utf-8")
    status = p.status or (*runner(p.lang, f"status{SOURCE_SUFFIXES[p.lang]}"), "{job_id}")
    first_kind = p.providers[0][1] if p.providers else "idempotent"
    return string.Template(text).substitute(
        lang=LANG_NAMES[p.lang],
        t=prefix,
        name=_toml(p.name),
        command=_toml(p.command),
        enqueue=_toml(p.enqueue),
        status=("" if p.status else "# ") + f"status = {_toml(status)}",
        provider=_toml(p.provider),
        url_var=env.provider_env_var(p.provider),
        env_block=_env_block(p),
        kind=_toml(first_kind),
        persona_note=_persona_note(p.lang, p.provider, first_kind)
        + _routes_note(first_kind, prefix),
        more_providers="".join(
            _provider_block(p.lang, name, kind, prefix) for name, kind in p.providers[1:]
        ),
    )


def _persona_note(lang: str, name: str, kind: str) -> str:
    """After a persona's ``kind`` line: the SDK's base-URL line for the worker's
    language, and ``env`` when the SDK reads a variable of its own."""
    if kind not in PERSONA_KINDS:
        return ""
    var = env.provider_env_var(name)
    line = base_url_line(kind, lang, var)
    guide = GUIDES[kind]
    under = f"{PERSONA_KINDS[kind]} underneath"
    if kind == DECLARED:
        under = "its kind follows its routes"
    out = [f"# The {kind} persona ({under}): {guide.write}, the job's"]
    out.append(f"# id in {guide.job_id}.")
    if line is not None:
        out += ["# Point the SDK at it:", f"#   {line}"]
    else:
        suffix = f' + "{guide.suffix}"' if guide.suffix else ""
        out.append(f"# Point your HTTP client at {var}{suffix}.")
    own = sdk_env(kind, lang)
    if own is not None:
        out += [
            f"# The SDK reads {own} by itself: crashpoint puts the base URL there too.",
            f'env = "{own}"',
        ]
    else:
        out.append(
            "# Or name a variable your worker reads the base URL from (optional):"
            f'\n# env = "{kind.upper()}_API_BASE"'
        )
    return "\n" + "\n".join(out)


def _provider_block(lang: str, name: str, kind: str, prefix: str) -> str:
    """A further ``[[providers]]`` block, for each ``--provider`` after the first."""
    what = "a kind of crashpoint's own" if kind in PROVIDER_KINDS else f"the {kind} persona"
    return (
        f"\n\n[[{prefix}providers]]\n# {what}; the worker reads its URL from "
        f"{env.provider_env_var(name)}.\nname = {_toml(name)}\nkind = {_toml(kind)}"
        + _persona_note(lang, name, kind)
        + _routes_note(kind, prefix)
    )


def _routes_note(kind: str, prefix: str) -> str:
    """A declared API's route table, to edit into the service's own (kind = "http")."""
    if kind != DECLARED:
        return ""
    body = """'{"id": "{effect.id}", "external_ref": "{effect.key}"}'"""
    return (
        '\n# Its routes (docs/providers.md, "http"): the create and where its key and the'
        f"\n# job's id ride, then the lookup.\n[{prefix}providers.routes.create]"
        '\npath = "/orders"\nkey = "body:$.meta.request_id"\njob = "body:$.meta.job_id"'
        f"\nbody = {body}\n\n[{prefix}providers.routes.lookup]"
        f'\npath = "/orders"\nby = "query:external_ref"\nbody = {body}'
    )


def _env_block(p: Plan) -> str:
    """The variables the worker reads, as an aligned comment block."""
    rows = [
        (env.provider_env_var(p.provider), "the provider's base URL, one per [[providers]]"),
        (env.provider_kind_var(p.provider), "its kind: idempotent, plain or unqueryable"),
        (env.STATE_DIR, "a fresh directory per trial (the working directory):"),
        ("", "keep the queue and the per-job records here"),
        (env.WORKER_ID, "this worker's name (w1, w2, ...): its X-Worker-Id"),
        (env.FAILPOINTS, f"the failpoint socket; {p.client[0]} talks to it"),
        ("CRASHPOINT_LEASE_TTL_S", "the lease to use (lease_ttl_s below)"),
        ("CRASHPOINT_HTTP_TIMEOUT_S", "the HTTP timeout to use"),
        ("CRASHPOINT_MAX_ATTEMPTS", "the cap on writes per job (max_attempts below)"),
        (f"{env.RECOVERY}=1", "after a state-store restore: reconcile before acting"),
        (env.LEDGER_DSN, "the [target.ledger] dsn, when one is declared"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"#   {name:<{width}}  {what}" for name, what in rows)


def init_command(
    directory: Path,
    *,
    lang: str | None,
    force: bool,
    pyproject: bool,
    console: Console | None = None,
    providers: Sequence[str] = (),
) -> int:
    """Write the configuration and the client; print what to do next."""
    console = console or stdout
    if lang is None:
        lang = guess_lang(directory)
        if lang is None:
            # An empty directory is where a new user starts: a Python skeleton they can
            # change beats a stop to ask for a flag; the first line says so.
            lang = DEFAULT_LANG
            console.print(
                f"crashpoint init: nothing here tells the worker's language (no package.json, "
                f"go.mod, *.py or *.sh); writing for {lang} (--lang node, go or shell for another)",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
    p = plan(directory, lang, providers)
    client = directory / p.client[0]
    if pyproject:
        config = directory / PYPROJECT
        if not config.is_file():
            raise ConfigError(
                f"{config}: no such file; drop --pyproject to write {CONFIG_FILE} instead"
            )
        text = _with_table(config, render(p, prefix="tool.crashpoint."), force=force)
    else:
        config = directory / CONFIG_FILE
        text = render(p)
    for path in (config, client) if not pyproject else (client,):
        if path.exists() and not force:
            raise ConfigError(f"{path}: already exists; pass --force to overwrite it")
    config.write_text(text, encoding="utf-8")
    client.parent.mkdir(parents=True, exist_ok=True)
    client.write_text(p.client[1], encoding="utf-8")
    _print_next(console, p, config=config.name, client=p.client[0])
    return 0


#: What goes in place of a placeholder, by key.
_WHAT = {
    "command": "the command that starts one worker",
    "enqueue": "the command that puts one job in your worker's queue",
    "status": "the command that prints one job's state",
}


def next_steps(p: Plan, *, config: str) -> list[tuple[str, list[str]]]:
    """What to do after init: each step's text and the lines to type or write for it."""
    steps: list[tuple[str, list[str]]] = []
    for key, value in p.placeholders():
        steps.append((f"In {config}, replace {value} in target.{key} with {_WHAT[key]}.", []))
    if p.lang == "go":
        steps.append(("Build the worker where crashpoint looks for it:", ["go build -o worker ."]))
    steps.append(("At each boundary of the worker, call the failpoint client:", list(p.usage)))
    steps.append(
        (
            "Check the wiring (starts the worker once, enqueues one job):",
            [f"crashpoint check-config -c {config}"],
        )
    )
    steps.append(
        (
            "First run, one scenario (a few seconds):",
            [f"crashpoint run -c {config} --scenario {FIRST_SCENARIO}"],
        )
    )
    steps.append(("Every scenario:", [f"crashpoint run -c {config}"]))
    return steps


def _print_next(console: Console, p: Plan, *, config: str, client: str) -> None:
    def say(text: str) -> None:
        # Commands are never broken across lines; they are whole for copy and paste.
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    width = max(40, min(console.width, 88))
    say(f"wrote {config} and {client} for a {LANG_NAMES[p.lang]} worker: {' '.join(p.command)}")
    say("")
    say("Next:")
    for i, (text, lines) in enumerate(next_steps(p, config=config), start=1):
        say(textwrap.fill(text, width, initial_indent=f"  {i}. ", subsequent_indent="     "))
        for line in lines:
            say(f"       {line}")


def _with_table(pyproject: Path, table: str, *, force: bool) -> str:
    """``pyproject.toml`` with ``table`` appended, the rest of it byte for byte."""
    text = pyproject.read_text(encoding="utf-8")
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{pyproject}: not valid TOML ({exc}); fix it first") from None
    if "crashpoint" in before.get("tool", {}):
        if not force:
            raise ConfigError(
                f"{pyproject}: already has a [tool.crashpoint] table; pass --force to replace it"
            )
        text = _without_table(text)
        kept = tomllib.loads(text)
        before["tool"].pop("crashpoint")
        if not before["tool"]:
            before.pop("tool")
        if kept != before:
            raise ConfigError(
                f"{pyproject}: its [tool.crashpoint] table cannot be replaced without touching "
                "the rest; delete the table by hand and run crashpoint init again"
            )
    if text and not text.endswith("\n"):
        text += "\n"
    return f"{text}\n{table}" if text.strip() else table


_HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\-\" ]+?)\s*\]\]?\s*(#.*)?$")


def _without_table(text: str) -> str:
    """``text`` without its ``tool.crashpoint`` tables and the comments just above them."""
    out: list[str] = []
    ours = False
    for line in text.splitlines(keepends=True):
        header = _HEADER.match(line)
        if header:
            name = header.group(1).replace(" ", "").replace('"', "")
            ours = name == "tool.crashpoint" or name.startswith("tool.crashpoint.")
            if ours:
                while out and (not out[-1].strip() or out[-1].lstrip().startswith("#")):
                    out.pop()  # the comments above a table belong to it
        if not ours:
            out.append(line)
    return "".join(out)


def _toml(value: str | Sequence[str]) -> str:
    # A JSON string is a TOML basic string; an array of them is a TOML array.
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return "[" + ", ".join(json.dumps(v, ensure_ascii=False) for v in value) + "]"
