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

Watching and judging are apart: :func:`judge` turns a :class:`Seen` into lines without
any I/O, so every message is unit-tested.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness.commands.check_lines import FAIL, GLYPHS, OK, SKIP, WARN, Line
from harness.commands.check_orders import Orders, exercise_orders, order_lines
from harness.commands.console import stdout
from harness.commands.init_plan import FIRST_SCENARIO, PLACEHOLDER
from harness.contract.env import (
    FAILPOINTS,
    RECOVERY,
    STATE_DIR,
    provider_env_var,
    provider_kind_var,
)
from harness.contract.errors import ConfigError
from harness.contract.vocabulary import ExitCode
from harness.targets.command_lifecycle import declared_note
from harness.targets.config import (
    CommandConfig,
    JobStatus,
    ProviderDecl,
    find_config,
    load_config,
)
from harness.targets.config_routes import describe
from harness.targets.personas import write_hint

JOB = "j-0001"
#: The boundaries a job passes when nothing goes wrong, in order.
HAPPY_POINTS = ("after_claim", "before_external_call", "after_external_call", "after_local_write")
#: The ones the crash scenarios hold a worker at; missing them makes those cells inconclusive.
HELD_POINTS = ("before_external_call", "after_external_call")
#: After the job is done, how long to keep watching for late failpoints and a second effect.
SETTLE_S = 0.5
_POLL_S = 0.1
_WRITE_PATH = {"idempotent": "/v1/effects", "plain": "/v1/sends", "unqueryable": "/v1/sends"}
#: The write tool of an MCP provider, by kind (fake_providers.tools has the whole table).
_TOOL = {"idempotent": "create_ticket", "plain": "send_message", "unqueryable": "send_message"}


@dataclass
class Seen:
    """What one watched start of the worker showed; everything :func:`judge` needs."""

    config: CommandConfig
    waited_s: float
    #: Provider name -> its arrivals (``fake_providers.models.Arrival``) and effects.
    arrivals: dict[str, list[Any]] = field(default_factory=dict)
    effects: dict[str, list[Any]] = field(default_factory=dict)
    #: ``(point, job)`` of every failpoint line, in arrival order.
    hits: list[tuple[str, str | None]] = field(default_factory=list)
    status: JobStatus | None = None
    status_error: str | None = None
    #: The worker's exit status; None while it still ran at the end.
    worker_exit: int | None = None
    worker_log: str = ""
    #: Why the enqueue command failed; the worker is then never started.
    enqueue_error: str | None = None
    #: Persona provider name -> every request the worker sent it, as ``(method, path,
    #: status)``: a path the persona does not serve is recorded nowhere else.
    tapped: dict[str, list[Any]] = field(default_factory=dict)
    #: What the commands did when called in the harness's other orders (status before
    #: the first enqueue, the same job enqueued twice before any worker).
    orders: Orders = field(default_factory=Orders)


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
            f"{p.name} ({_wire(p)}{', over MCP' if p.transport == 'mcp' else ''})"
            for p in config.providers
        )
        lines.append(Line(OK, f"configuration is valid: providers {names}"))
        declared = declared_note(config)
        lines += [Line(OK, declared)] if declared is not None else []
    return lines


def watch(config: CommandConfig, *, timeout_s: float) -> Seen:
    """Start the providers and one worker, enqueue one job, and record what happens."""
    from fake_providers import start_provider
    from harness.backends import get_backend
    from harness.infra import trial_settings
    from harness.rendezvous import Rendezvous
    from harness.targets.command import CommandAdapter
    from harness.targets.wiretap import WireTap
    from harness.watchdog import Watchdog

    settings = trial_settings(config)
    seen = Seen(config=config, waited_s=0.0)
    with contextlib.ExitStack() as stack:
        # Short: the failpoint socket lives here, and UNIX socket paths are short.
        work = Path(tempfile.mkdtemp(prefix="cp-check-"))
        stack.callback(shutil.rmtree, work, ignore_errors=True)
        watchdog = stack.enter_context(Watchdog.start())
        watchdog.watch_dir(work)
        providers = {
            p.name: stack.enter_context(
                start_provider(
                    p.kind, state_path=work / f"provider-{i}.db", name=p.name, **p.start_options()
                )
            )
            for i, p in enumerate(config.providers)
        }
        # A persona's worker is watched through a tap: its 404s are recorded nowhere else
        # (an HTTP tap: an smtp provider's mail, on a port of its own, is reached straight).
        taps = {
            p.name: stack.enter_context(WireTap(providers[p.name].url))
            for p in config.providers
            if p.persona is not None and not providers[p.name].listeners
        }
        rendezvous = stack.enter_context(Rendezvous(work / "failpoints.sock"))
        env = {k: v for k, v in os.environ.items() if k != RECOVERY}
        for p in config.providers:
            tap = taps.get(p.name)
            env[provider_env_var(p.name)] = (
                tap.url if tap is not None else providers[p.name].worker_url
            )
            env[provider_kind_var(p.name)] = p.kind
        env[FAILPOINTS] = str(rendezvous.path)
        adapter = CommandAdapter(config, trial_dir=work)
        if adapter.broker is not None:
            adapter.broker.watchdog = watchdog
        stack.callback(adapter.close)  # its broker and served commands, before the directory goes
        adapter.setup()
        env[STATE_DIR] = str(adapter.state_dir)
        first = config.providers[0].name
        adapter.attach_providers([p.client for p in providers.values()], env)
        worker_env = env | adapter.worker_env(
            "w1",
            mutant=None,
            lease_ttl_s=settings.lease_ttl_s,
            http_timeout_s=settings.http_timeout_s,
        )
        worker_env |= adapter.url_aliases(worker_env)
        try:
            seen.orders = exercise_orders(
                adapter, JOB, first, {"job_id": JOB, "amount_cents": 4200}
            )
        except ConfigError as exc:
            seen.enqueue_error = str(exc)
            return seen
        backend = get_backend("process", watchdog=watchdog)
        stack.callback(backend.close)
        worker = backend.start("w1", adapter.worker_argv(), env=worker_env, cwd=adapter.state_dir)
        t0 = time.monotonic()
        for _ in _until(t0 + timeout_s):
            _look(seen, providers, adapter, rendezvous)
            if not worker.alive() or _finished(seen):
                break
        time.sleep(SETTLE_S)  # late failpoints (after_local_write) and a second effect
        _look(seen, providers, adapter, rendezvous)
        seen.tapped = {name: list(tap.seen) for name, tap in taps.items()}
        seen.waited_s = time.monotonic() - t0
        seen.worker_exit = None if worker.alive() else worker.returncode
        seen.worker_log = _tail(adapter.state_dir / "w1.stderr.log")
    return seen


def judge(seen: Seen) -> list[Line]:
    """The findings, in the order a user fixes them."""
    config = seen.config
    first = config.providers[0]
    if seen.enqueue_error is not None:
        return [Line(FAIL, seen.enqueue_error)]
    lines: list[Line] = order_lines(seen.orders, JOB, status=config.status is not None)
    if seen.worker_exit not in (None, 0):
        said = f"; its stderr ends: {seen.worker_log}" if seen.worker_log else ""
        lines.append(
            Line(
                FAIL,
                f"the worker exited with status {seen.worker_exit}{said}",
                "its stderr says why; a worker keeps serving jobs until crashpoint stops it",
            )
        )
    for p in config.providers:
        lines.append(_provider_line(seen, p, first=p.name == first.name))
        if p.persona is not None:
            lines.extend(_persona_lines(seen, p))
    writes = [a for a in seen.arrivals.get(first.name, []) if a.kind == "write"]
    if writes:
        lines.append(_write_line(writes[0], first.kind, persona=first.persona))
    lines.append(_failpoint_line(seen))
    lines.append(_status_line(seen))
    lines.append(_effect_line(seen))
    return lines


def _provider_line(seen: Seen, p: ProviderDecl, *, first: bool) -> Line:
    name = p.name
    arrivals = seen.arrivals.get(name, [])
    var = provider_env_var(name)
    if arrivals:
        shown = ", ".join(f"{a.method} {a.path} {a.status or 'no answer'}" for a in arrivals[:3])
        read = f"{var} (or {p.env})" if p.env else var
        return Line(OK, f"the worker read {read}: {len(arrivals)} request(s) at {name} ({shown})")
    if not first:
        return Line(SKIP, f"no request at {name} (the check's one job is for another provider)")
    if p.persona is not None and seen.tapped.get(name):
        # Requests came, none the persona serves: _persona_lines names them.
        return Line(WARN, f"the worker read {var}, but {name} served none of its requests")
    if p.persona is not None:
        fix = f"point the {p.persona} SDK at the URL in {var}" + (f" (or {p.env})" if p.env else "")
        fix += f" and make {write_hint(p.persona)}"
    elif p.transport == "http":
        fix = f"read the URL from {var} and POST {_WRITE_PATH[p.kind]} there for each job"
    else:
        fix = f"read the URL from {var} and call its tool {_TOOL[p.kind]} at URL/mcp for each job"
    return Line(FAIL, f"no request reached provider {name} in {seen.waited_s:.0f} s", fix)


def _wire(p: ProviderDecl) -> str:
    """A provider's kind as the file names it: ``stripe over idempotent``, or the kind."""
    return f"{p.persona} over {p.kind}" if p.persona is not None else p.kind


def _persona_lines(seen: Seen, p: ProviderDecl) -> list[Line]:
    """The persona calls the worker made, and any it made to a path the persona lacks."""
    assert p.persona is not None
    arrivals = seen.arrivals.get(p.name, [])
    calls = list(
        dict.fromkeys(f"{a.method} {a.path.split('?', 1)[0]} ({a.kind})" for a in arrivals)
    )
    table = p.route_table
    lines = [Line(OK, f"routes of {p.name}: {line}") for line in describe(table or {})]
    if calls:
        lines.append(Line(OK, f"{p.persona}: {', '.join(calls)}"))
    served = {(a.method, a.path.split("?", 1)[0]) for a in arrivals}
    unserved = list(
        dict.fromkeys(
            f"{t.method} {t.path}"
            for t in seen.tapped.get(p.name, [])
            if t.status in (404, 405) and (t.method, t.path) not in served
        )
    )
    if unserved and table is not None:
        lines.append(
            Line(
                FAIL,
                f"the worker sent {unserved[0]}, which matches no declared route (404)",
                f"declare it in [providers.routes] of {p.name}, or fix the client's path",
            )
        )
    elif unserved:
        lines.append(
            Line(
                FAIL,
                f"the worker called {', '.join(unserved)}, which the {p.persona} persona does "
                "not serve (404)",
                f"make {write_hint(p.persona)}; docs/providers.md lists what it serves",
            )
        )
    return lines


#: What a refused write most likely lacks, by the provider's status.
_REFUSED = {
    415: "send the body as JSON, with Content-Type: application/json",
    422: "the key was used before with another payload: send the job's body unchanged",
    409: "the key is still in flight: an attempt with the same key has not finished",
}


def _write_line(write: Any, kind: str, *, persona: str | None = None) -> Line:
    if kind == "idempotent" and not write.idempotency_key:
        return Line(
            FAIL,
            f"the write has no Idempotency-Key (the provider answered {write.status})",
            f"send one derived from the job id only, such as effect-{JOB}",
        )
    if write.status is not None and write.status >= 400:
        return Line(
            FAIL,
            f"the provider refused the write with {write.status}",
            f"make {write_hint(persona)}"
            if persona is not None
            else _REFUSED.get(
                write.status, "see the provider contract in fake_providers/README.md"
            ),
        )
    if write.job_id != JOB:
        return Line(
            FAIL,
            f"the write carries job_id {write.job_id!r}, not {JOB!r}",
            f"put the job's id where the {persona} persona reads it: {write_hint(persona)}"
            if persona is not None
            else "send the payload file's body unchanged: the provider reads job_id from it",
        )
    if kind != "idempotent" and not write.client_marker:
        return Line(
            FAIL,
            "the write has no client_marker"
            + (f" where the {persona} persona reads it" if persona else " in its body"),
            "add one derived from the job id, so a retry can look it up first"
            + (f" ({write_hint(persona)})" if persona else ""),
        )
    key = write.idempotency_key or write.client_marker
    carried = "the job's id" if persona is not None else "the job's body"
    return Line(OK, f"the write for {JOB} carries {key!r} and {carried}")


def _failpoint_line(seen: Seen) -> Line:
    if not seen.hits:
        return Line(
            FAIL,
            "no failpoint line arrived: the worker never used CRASHPOINT_FAILPOINTS",
            "call the failpoint client (crashpoint init copies one) at each boundary, such as "
            "failpoint('before_external_call', job, attempt); docs/failpoints.md",
        )
    mine = list(dict.fromkeys(point for point, job in seen.hits if job == JOB))
    if not mine:
        jobs = ", ".join(sorted({str(job) for _, job in seen.hits}))
        return Line(
            FAIL,
            f"failpoint lines arrived, but for job {jobs}, never {JOB}",
            "pass the job id crashpoint enqueued (job_id in the payload file)",
        )
    missing = [p for p in HAPPY_POINTS if p not in mine]
    text = f"failpoints reached for {JOB}: {', '.join(mine)}"
    held = [p for p in missing if p in HELD_POINTS]
    if held:
        return Line(
            WARN,
            f"{text}; never {', '.join(held)}",
            "the cells that hold a worker there will be inconclusive; call failpoint() at "
            "those boundaries too",
        )
    return Line(OK, text + (f" (not {', '.join(missing)})" if missing else ""))


def _status_line(seen: Seen) -> Line:
    if seen.status_error is not None:
        return Line(FAIL, seen.status_error)
    if seen.config.status is None:
        return Line(
            SKIP,
            "no status command: the end state is judged from the provider's records alone",
            "",
        )
    status = seen.status
    if status is not None and status.state == "done":
        attempts = f" after {status.attempts} attempt(s)" if status.attempts is not None else ""
        return Line(OK, f"status says {JOB} is done{attempts}")
    state = status.state if status is not None else "nothing"
    why = f" ({status.last_error})" if status is not None and status.last_error else ""
    return Line(
        FAIL,
        f"status says {JOB} is {state}{why} after {seen.waited_s:.0f} s",
        "print done once the job's effect is confirmed",
    )


def _effect_line(seen: Seen) -> Line:
    effects = _effects(seen)
    per = Counter(e.provider for e in effects)
    where = ", ".join(sorted(per))
    # A job owes one effect at each provider it calls (a charge, then a receipt).
    twice = sorted(name for name, n in per.items() if n > 1)
    if effects and not twice:
        return Line(OK, f"exactly one effect for {JOB} at each of {where}")
    if effects:
        shown = "; ".join(f"{per[name]} effects for {JOB} at {name}" for name in twice)
        return Line(
            FAIL,
            f"{shown}: it was sent more than once",
            "derive the idempotency key (or client_marker) from the job id and send each job once",
        )
    return Line(
        FAIL,
        f"no effect for {JOB} in {seen.waited_s:.0f} s",
        "the lines above say where the job stopped",
    )


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


def _look(seen: Seen, providers: dict[str, Any], adapter: Any, rendezvous: Any) -> None:
    for name, provider in providers.items():
        seen.arrivals[name] = provider.client.arrivals()
        seen.effects[name] = provider.client.effects()
    seen.hits = [(h.point, h.job) for h in rendezvous.hits()]
    if seen.config.status is not None and not _final(seen):
        try:
            seen.status = adapter.job_status(JOB)
        except ConfigError as exc:
            seen.status_error = str(exc)


def _effects(seen: Seen) -> list[Any]:
    return [e for effects in seen.effects.values() for e in effects if e.job_id == JOB]


def _finished(seen: Seen) -> bool:
    """Nothing more to wait for: the status is final, or (without one) the effect is in."""
    return _final(seen) if seen.config.status is not None else bool(_effects(seen))


def _final(seen: Seen) -> bool:
    return seen.status_error is not None or (seen.status is not None and seen.status.final)


def _until(deadline: float) -> Iterator[None]:
    while time.monotonic() < deadline:
        yield
        time.sleep(_POLL_S)


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


def _tail(path: Path, limit: int = 200) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines()]
    except OSError:
        return ""
    last = next((ln for ln in reversed(lines) if ln), "")
    return last[:limit]
