"""check-config's watching: the providers and one worker started, one job enqueued, and
what happened recorded in a :class:`Seen`.

Judging is apart (``check_findings.py``), without any I/O, so every message is
unit-tested against a hand-made :class:`Seen`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.commands.check_orders import Orders, exercise_orders
from harness.contract.env import (
    FAILPOINTS,
    RECOVERY,
    STATE_DIR,
    provider_env_var,
    provider_kind_var,
)
from harness.contract.errors import ConfigError
from harness.targets.config import CommandConfig, JobStatus

JOB = "j-0001"
#: After the job is done, how long to keep watching for late failpoints and a second effect.
SETTLE_S = 0.5
_POLL_S = 0.1


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


def watch(config: CommandConfig, *, timeout_s: float) -> Seen:
    """Start the providers and one worker, enqueue one job, and record what happens."""
    from harness.backends import get_backend
    from harness.rendezvous import Rendezvous
    from harness.watchdog import Watchdog

    seen = Seen(config=config, waited_s=0.0)
    with contextlib.ExitStack() as stack:
        # Short: the failpoint socket lives here, and UNIX socket paths are short.
        work = Path(tempfile.mkdtemp(prefix="cp-check-"))
        stack.callback(shutil.rmtree, work, ignore_errors=True)
        watchdog = stack.enter_context(Watchdog.start())
        watchdog.watch_dir(work)
        providers, taps = _start_providers(stack, config, work)
        rendezvous = stack.enter_context(Rendezvous(work / "failpoints.sock"))
        env = _provider_env(config, providers, taps, rendezvous.path)
        adapter, worker_env = _open_adapter(stack, config, work, watchdog, env, providers)
        first = config.providers[0].name
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
        _observe(seen, worker, providers, adapter, rendezvous, timeout_s=timeout_s)
        seen.tapped = {name: list(tap.seen) for name, tap in taps.items()}
    return seen


def _start_providers(
    stack: contextlib.ExitStack, config: CommandConfig, work: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A fake provider for each ``[[providers]]`` entry, and a tap before each persona."""
    from fake_providers import start_provider
    from harness.targets.wiretap import WireTap

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
    return providers, taps


def _provider_env(
    config: CommandConfig, providers: dict[str, Any], taps: dict[str, Any], socket: Path
) -> dict[str, str]:
    """The environment without a recovery flag, with each provider's URL and the socket."""
    env = {k: v for k, v in os.environ.items() if k != RECOVERY}
    for p in config.providers:
        tap = taps.get(p.name)
        env[provider_env_var(p.name)] = tap.url if tap is not None else providers[p.name].worker_url
        env[provider_kind_var(p.name)] = p.kind
    env[FAILPOINTS] = str(socket)
    return env


def _open_adapter(
    stack: contextlib.ExitStack,
    config: CommandConfig,
    work: Path,
    watchdog: Any,
    env: dict[str, str],
    providers: dict[str, Any],
) -> tuple[Any, dict[str, str]]:
    """The target's adapter set up (``env`` gains its state dir), and the worker's env."""
    from harness.infra import trial_settings
    from harness.targets.command import CommandAdapter

    settings = trial_settings(config)
    adapter = CommandAdapter(config, trial_dir=work)
    if adapter.broker is not None:
        adapter.broker.watchdog = watchdog
    stack.callback(adapter.close)  # its broker and served commands, before the directory goes
    adapter.setup()
    env[STATE_DIR] = str(adapter.state_dir)
    adapter.attach_providers([p.client for p in providers.values()], env)
    worker_env = env | adapter.worker_env(
        "w1",
        mutant=None,
        lease_ttl_s=settings.lease_ttl_s,
        http_timeout_s=settings.http_timeout_s,
    )
    worker_env |= adapter.url_aliases(worker_env)
    return adapter, worker_env


def _observe(
    seen: Seen,
    worker: Any,
    providers: dict[str, Any],
    adapter: Any,
    rendezvous: Any,
    *,
    timeout_s: float,
) -> None:
    """Look until the job is finished, the worker gone or the time up; then settle."""
    t0 = time.monotonic()
    for _ in _until(t0 + timeout_s):
        _look(seen, providers, adapter, rendezvous)
        if not worker.alive() or _finished(seen):
            break
    time.sleep(SETTLE_S)  # late failpoints (after_local_write) and a second effect
    _look(seen, providers, adapter, rendezvous)
    seen.waited_s = time.monotonic() - t0
    seen.worker_exit = None if worker.alive() else worker.returncode
    seen.worker_log = _tail(adapter.state_dir / "w1.stderr.log")


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


def job_effects(seen: Seen) -> list[Any]:
    return [e for effects in seen.effects.values() for e in effects if e.job_id == JOB]


def _finished(seen: Seen) -> bool:
    """Nothing more to wait for: the status is final, or (without one) the effect is in."""
    return _final(seen) if seen.config.status is not None else bool(job_effects(seen))


def _final(seen: Seen) -> bool:
    return seen.status_error is not None or (seen.status is not None and seen.status.final)


def _until(deadline: float) -> Iterator[None]:
    while time.monotonic() < deadline:
        yield
        time.sleep(_POLL_S)


def _tail(path: Path, limit: int = 200) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines()]
    except OSError:
        return ""
    last = next((ln for ln in reversed(lines) if ln), "")
    return last[:limit]
