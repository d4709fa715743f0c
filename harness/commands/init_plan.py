"""What ``crashpoint init`` guesses from a worker's directory: its language, the
commands that start it and enqueue a job, the provider name it already reads, and the
failpoint client for its language. Nothing here writes a file; :mod:`harness.commands.init`
does, from the :class:`Plan` made here.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from harness.contract import env
from harness.contract.errors import ConfigError
from harness.targets.config import KIND_NAMES, PYPROJECT

#: The scenario of the first run: it needs only a failpoint and a stable key.
FIRST_SCENARIO = "crash_before_external_call"


DEFAULT_PROVIDER = "billing"


#: A Go worker runs as the program ``go build -o worker .`` makes beside the file.
GO_BINARY = ("./worker",)


#: A value the user must replace; ``check-config`` finds them by this shape.
PLACEHOLDER = re.compile(r"^<[^<>]+>$")


_PROVIDER_IN_SOURCE = re.compile(r"CRASHPOINT_PROVIDER_([A-Z0-9_]+?)_URL")


SOURCE_SUFFIXES = {"python": ".py", "node": ".js", "go": ".go", "shell": ".sh"}


LANG_NAMES = {"python": "Python", "node": "Node.js", "go": "Go", "shell": "shell"}


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


def _json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def runner(lang: str, script: str) -> tuple[str, ...]:
    if lang == "go":  # a built program: `go run` would compile again at every start
        return (f"./{Path(script).stem}",)
    return (_RUNNER[lang], script)


def _beside(directory: Path, lang: str, stem: str, *fields: str) -> tuple[str, ...] | None:
    """The command for the ``enqueue`` or ``status`` script beside the worker, if any."""
    script = f"{stem}{SOURCE_SUFFIXES[lang]}"
    if lang == "go" or not (directory / script).is_file():
        return None
    return (*runner(lang, script), *fields)


def _guess_command(directory: Path, lang: str, package: dict[str, Any]) -> tuple[str, ...]:
    if lang == "go":
        return GO_BINARY
    suffix = SOURCE_SUFFIXES[lang]
    preferred = [f"worker{suffix}", f"main{suffix}", f"app{suffix}"]
    if lang == "node":
        main = package.get("main")
        preferred = ["worker.js", *([main] if isinstance(main, str) else []), "index.js"]
    for name in preferred:
        if (directory / name).is_file():
            return runner(lang, name)
    sources = [p.name for p in sorted(directory.glob(f"*{suffix}")) if p.stem not in _SKIP_SOURCES]
    if len(sources) == 1:
        return runner(lang, sources[0])
    return runner(lang, f"<worker{suffix}>")


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
    suffix = SOURCE_SUFFIXES[lang]
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
