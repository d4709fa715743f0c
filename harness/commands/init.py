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
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.commands.console import stdout
from harness.contract import env
from harness.contract.errors import ConfigError
from harness.contract.vocabulary import DECLARED, PERSONA_KINDS, PROVIDER_KINDS
from harness.targets.config import CONFIG_FILE, KIND_NAMES, PYPROJECT
from harness.targets.personas import GUIDES, base_url_line, sdk_env

#: The scenario of the first run: it needs only a failpoint and a stable key.
FIRST_SCENARIO = "crash_before_external_call"
DEFAULT_PROVIDER = "billing"
#: A Go worker runs as the program ``go build -o worker .`` makes beside the file.
GO_BINARY = ("./worker",)
#: A value the user must replace; ``check-config`` finds them by this shape.
PLACEHOLDER = re.compile(r"^<[^<>]+>$")
_PROVIDER_IN_SOURCE = re.compile(r"CRASHPOINT_PROVIDER_([A-Z0-9_]+?)_URL")
_SOURCE_SUFFIXES = {"python": ".py", "node": ".js", "go": ".go", "shell": ".sh"}
_LANG_NAMES = {"python": "Python", "node": "Node.js", "go": "Go", "shell": "shell"}
_RUNNER = {"python": "python3", "node": "node", "shell": "sh"}
_SKIP_SOURCES = {"failpoint", "enqueue", "status", "setup", "conftest", "noxfile"}
_PY_CLIENT_IMPORT = "from harness.contract.env import FAILPOINTS, WORKER_ID\n"


def templates() -> Any:
    """The directory of init's templates and the failpoint clients, as shipped."""
    return files("harness") / "templates"


@dataclass(frozen=True)
class Plan:
    """What init writes for one directory, guessed from its files."""

    lang: str
    name: str
    command: tuple[str, ...]
    enqueue: tuple[str, ...]
    status: tuple[str, ...] | None
    provider: str
    #: The client's path relative to the directory, and its text.
    client: tuple[str, str]
    #: How the worker loads the client and calls a failpoint, in its language.
    usage: tuple[str, ...]
    #: Each ``[[providers]]`` block's ``(name, kind)``; ``provider`` is the first's name.
    providers: tuple[tuple[str, str], ...] = ()

    def placeholders(self) -> list[tuple[str, str]]:
        """``(key, value)`` for every value the user still has to replace."""
        argvs = {"command": self.command, "enqueue": self.enqueue, "status": self.status or ()}
        return [(k, a) for k, argv in argvs.items() for a in argv if PLACEHOLDER.match(a)]


def guess_lang(directory: Path) -> str | None:
    """The worker's language from the files in ``directory``, or None if they say none."""
    names = {p.name for p in directory.iterdir()}
    if "worker.js" in names or "package.json" in names:
        return "node"
    if "go.mod" in names:
        return "go"
    if "pyproject.toml" in names or any(n.endswith(".py") for n in names):
        return "python"
    if any(n.endswith(".sh") for n in names):
        return "shell"
    return None


#: What ``init`` writes for when nothing here tells the language (an empty directory).
DEFAULT_LANG = "python"


def plan(directory: Path, lang: str, providers: Sequence[str] = ()) -> Plan:
    """Everything init would write for ``directory``, before anything is written;
    ``providers`` are ``--provider`` values: a kind or persona (``stripe``), or
    ``NAME=KIND`` (``billing=stripe``)."""
    package = _json(directory / "package.json") if lang == "node" else {}
    declared = provider_blocks(providers, _guess_provider(directory, lang))
    return Plan(
        lang=lang,
        name=_guess_name(directory, lang, package),
        command=_guess_command(directory, lang, package),
        enqueue=_beside(directory, lang, "enqueue", "{job_id}", "{payload_file}")
        or ("<enqueue program>", "{job_id}", "{payload_file}"),
        status=_beside(directory, lang, "status", "{job_id}"),
        provider=declared[0][0],
        client=_client(lang, esm=package.get("type") == "module"),
        usage=_usage(directory, lang, esm=package.get("type") == "module"),
        providers=declared,
    )


def provider_blocks(values: Sequence[str], guessed: str) -> tuple[tuple[str, str], ...]:
    """``(name, kind)`` per ``--provider`` value; the first is named as the worker
    already reads it (``guessed``), the others after their kind. None given: one
    idempotent provider."""
    out: list[tuple[str, str]] = []
    for i, value in enumerate(values or ("idempotent",)):
        name, sep, kind = value.partition("=")
        if not sep:
            name, kind = (guessed if i == 0 else value), value
        if kind not in KIND_NAMES:
            raise ConfigError(f"--provider {value!r}: {kind!r} is {_unknown(kind)}")
        if not env.provider_env_name(name):
            raise ConfigError(f"--provider {value!r}: name {name!r} has no letter or digit")
        if any(env.provider_env_var(n) == env.provider_env_var(name) for n, _ in out):
            raise ConfigError(
                f"--provider {value!r}: a provider named {name!r} is declared already; "
                "name this one with NAME=KIND"
            )
        out.append((name, kind))
    return tuple(out)


def _unknown(kind: str) -> str:
    import difflib

    near = difflib.get_close_matches(kind.lower(), KIND_NAMES, n=1, cutoff=0.6)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return f"not a kind or persona; {hint}use one of {', '.join(KIND_NAMES)}"


def render(p: Plan, *, prefix: str = "") -> str:
    """The configuration text; ``prefix`` is ``tool.crashpoint.`` inside pyproject.toml."""
    text = (templates() / "crashpoint.toml.in").read_text(encoding="utf-8")
    status = p.status or (*_runner(p.lang, f"status{_SOURCE_SUFFIXES[p.lang]}"), "{job_id}")
    first_kind = p.providers[0][1] if p.providers else "idempotent"
    return string.Template(text).substitute(
        lang=_LANG_NAMES[p.lang],
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
    say(f"wrote {config} and {client} for a {_LANG_NAMES[p.lang]} worker: {' '.join(p.command)}")
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


def _json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _runner(lang: str, script: str) -> tuple[str, ...]:
    if lang == "go":  # a built program: `go run` would compile again at every start
        return (f"./{Path(script).stem}",)
    return (_RUNNER[lang], script)


def _beside(directory: Path, lang: str, stem: str, *fields: str) -> tuple[str, ...] | None:
    """The command for the ``enqueue`` or ``status`` script beside the worker, if any."""
    script = f"{stem}{_SOURCE_SUFFIXES[lang]}"
    if lang == "go" or not (directory / script).is_file():
        return None
    return (*_runner(lang, script), *fields)


def _guess_command(directory: Path, lang: str, package: dict[str, Any]) -> tuple[str, ...]:
    if lang == "go":
        return GO_BINARY
    suffix = _SOURCE_SUFFIXES[lang]
    preferred = [f"worker{suffix}", f"main{suffix}", f"app{suffix}"]
    if lang == "node":
        main = package.get("main")
        preferred = ["worker.js", *([main] if isinstance(main, str) else []), "index.js"]
    for name in preferred:
        if (directory / name).is_file():
            return _runner(lang, name)
    sources = [p.name for p in sorted(directory.glob(f"*{suffix}")) if p.stem not in _SKIP_SOURCES]
    if len(sources) == 1:
        return _runner(lang, sources[0])
    return _runner(lang, f"<worker{suffix}>")


def _guess_name(directory: Path, lang: str, package: dict[str, Any]) -> str:
    name: object = None
    if lang == "node":
        name = package.get("name")
    elif lang == "python" and (directory / PYPROJECT).is_file():
        try:
            name = tomllib.loads((directory / PYPROJECT).read_text()).get("project", {}).get("name")
        except (OSError, tomllib.TOMLDecodeError):
            name = None
    elif lang == "go" and (directory / "go.mod").is_file():
        module = re.search(r"^module\s+(\S+)", (directory / "go.mod").read_text(), re.M)
        name = module.group(1).rstrip("/").rsplit("/", 1)[-1] if module else None
    if not isinstance(name, str) or not name.strip():
        name = directory.resolve().name or "worker"
    return name.strip()


def _guess_provider(directory: Path, lang: str) -> str:
    """The provider the worker already reads (``CRASHPOINT_PROVIDER_<NAME>_URL``)."""
    suffix = _SOURCE_SUFFIXES[lang]
    for path in sorted(directory.glob(f"*{suffix}")):
        if path.stem == "failpoint" or path.stat().st_size > 1_000_000:
            continue
        found = _PROVIDER_IN_SOURCE.search(path.read_text(encoding="utf-8", errors="replace"))
        if found:
            return found.group(1).lower()
    return DEFAULT_PROVIDER


def _client(lang: str, *, esm: bool) -> tuple[str, str]:
    if lang == "python":
        return "failpoint.py", python_client()
    if lang == "go":
        return "failpoint/failpoint.go", (templates() / "failpoint.go").read_text("utf-8")
    if lang == "node":
        # In a package of ES modules a .js file is one; the client is CommonJS.
        name = "failpoint.cjs" if esm else "failpoint.js"
        return name, (templates() / "failpoint.js").read_text("utf-8")
    return "failpoint.sh", (templates() / "failpoint.sh").read_text("utf-8")


def python_client() -> str:
    """``harness/contract/failpoint.py`` with its one import inlined: a worker that has
    no crashpoint installed runs it as it is."""
    source = (files("harness.contract") / "failpoint.py").read_text(encoding="utf-8")
    if _PY_CLIENT_IMPORT not in source:
        raise RuntimeError("harness/contract/failpoint.py no longer imports what init inlines")
    inlined = f'FAILPOINTS = "{env.FAILPOINTS}"\nWORKER_ID = "{env.WORKER_ID}"\n'
    header = "# crashpoint's failpoint client, copied by `crashpoint init` (docs/failpoints.md).\n"
    return header + source.replace(_PY_CLIENT_IMPORT, inlined)


def _usage(directory: Path, lang: str, *, esm: bool) -> tuple[str, ...]:
    if lang == "python":
        return (
            "from failpoint import failpoint",
            'failpoint("before_external_call", job_id, attempt)',
        )
    if lang == "node":
        load = (
            "import { failpoint } from './failpoint.cjs';"
            if esm
            else "const { failpoint } = require('./failpoint');"
        )
        return (load, "await failpoint('before_external_call', jobId, attempt);")
    if lang == "go":
        module = "yourmodule"
        if (directory / "go.mod").is_file():
            found = re.search(r"^module\s+(\S+)", (directory / "go.mod").read_text(), re.M)
            module = found.group(1) if found else module
        call = 'failpoint.At("before_external_call", jobID, attempt)'
        return (f'import "{module}/failpoint"', call)
    return (". ./failpoint.sh", 'failpoint before_external_call "$job" "$attempt"')
