"""Per-run infrastructure, and the one way to open a trial on it.

:class:`RunInfra` owns what a run's trials share (the watchdog, the Toxiproxy server,
PostgreSQL, the backend, the target, the warm providers, the abort, the trial settings)
and opens every trial: ``crashpoint run``, ``explore`` and ``replay``, pytest's items and
custom scenarios all call :meth:`RunInfra.open_trial` or :meth:`RunInfra.run_trial`, so
each trial gets the same settings, and a trial whose infrastructure failed under it (its
proxies vanished) is ``inconclusive`` whichever way it was opened.

Heavy pieces start only when a chosen cell needs them (as pytest-xdist creates its state
only when switched on). What cannot be had turns the cells that need it into ``skipped``
trials carrying the reason and the command that fixes it; it never fails a run that
does not need it, and never passes a cell that does.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import bytecode, faketime
from harness.backends.base import Backend
from harness.backends.zygote import Zygote, interpreter_of
from harness.contract.errors import InfrastructureError, ToxiproxyUnavailable
from harness.history import History
from harness.ledger_server import LedgerServerWatch
from harness.plan import Cell
from harness.probes import ProbeFailed, docker_version, postgres_dsn, postgres_version
from harness.targets.base import TargetAdapter
from harness.targets.serve import ServedPool
from harness.trial import Trial, TrialConfig
from harness.trial.state import fresh_dir
from harness.trial_run import Driver, TrialResult, play, skipped_result
from harness.watchdog import Watchdog

if TYPE_CHECKING:
    from fake_providers import ProviderPool
    from harness.network.seam import NetworkSeam
    from harness.targets.config import CommandConfig


def trial_settings(
    command: CommandConfig | None,
    *,
    lease_ttl_s: float | None = None,
    pg_dsn: str | None = None,
    backend: str = "process",
) -> TrialConfig:
    """The one place a run's trial settings are made, for every command: the lease is
    ``lease_ttl_s`` (a flag), else the target's declared one, else the reference worker's
    own on ``backend``; the SIGTERM grace is the target's declared one (docs/fairness.md)."""
    lease = lease_ttl_s or (command.lease_ttl_s if command is not None else None)
    grace = command.term_grace_s if command is not None else None
    return TrialConfig.for_target(lease, pg_dsn, backend=backend, term_grace_s=grace)


def base_environment() -> dict[str, Any]:
    """The versions every run records; the run's infrastructure fills in its servers."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "toxiproxy": None,
        "docker": None,
        "postgres": None,
    }


def infrastructure_failure(trial: Trial) -> str | None:
    """What of the run's infrastructure failed under ``trial`` (its proxies vanished with
    the Toxiproxy server, its PostgreSQL ledger restarted), or None: whatever such a trial
    saw is the harness's doing."""
    if trial.network is not None and (broken := trial.network.failure()) is not None:
        return broken
    return trial.ledger_server.failure() if trial.ledger_server is not None else None


def demoted(result: TrialResult, broken: str | None) -> TrialResult:
    """``result`` made ``inconclusive`` when its infrastructure failed (``broken``)."""
    if broken is None:
        return result
    was = f"{result.verdict}: {result.reason}" if result.reason else result.verdict
    return replace(
        result, verdict="inconclusive", violations=[], reason=f"{broken}; it ended {was}"
    )


class RunInfra:
    """What one run shares between its trials; a context manager that reaps it all."""

    def __init__(
        self,
        *,
        ledger: str,
        backend: str,
        pg_dsn: str | None,
        command: Any = None,
        lease_ttl_s: float | None = None,
        config: TrialConfig | None = None,
    ) -> None:
        #: A loaded ``crashpoint.toml`` (CommandConfig), or None for the reference worker.
        self.command = command
        self.ledger = ledger
        self.backend_name = backend
        self.pg_dsn = pg_dsn
        self.run_id = uuid.uuid4().hex[:12]
        self.watchdog: Watchdog | None = None
        self.toxiproxy: Any = None
        self.toxiproxy_error: str | None = None
        #: Parallel trials find a dead Toxiproxy server together; one restarts it.
        self._toxiproxy_lock = threading.Lock()
        self.docker: Any = None
        #: The run's warm provider processes, leased to its trials (fake_providers.pool).
        self.providers: ProviderPool | None = None
        #: The target's served commands of scope "run", shared by its trials.
        self.served: ServedPool | None = None
        self._served_lock = threading.Lock()
        #: The process the target's Python workers fork from (``[target.preload]``).
        self.zygote: Zygote | None = None
        self._zygote_lock = threading.Lock()
        self.versions: dict[str, str | None] = {}
        #: Undoes what the run set up in this process (the shared bytecode cache).
        self._stack = contextlib.ExitStack()
        #: Every trial's settings (``config`` overrides them, for tests).
        self.config = config or trial_settings(
            command, lease_ttl_s=lease_ttl_s, pg_dsn=pg_dsn, backend=backend
        )
        #: Set on Ctrl-C: the run's trials stop waiting and tear down (the runner clears
        #: it when a run starts, so a later run on the same infrastructure starts clear).
        self.abort = threading.Event()

    @classmethod
    @contextlib.contextmanager
    def open(
        cls,
        cells: Sequence[Cell],
        *,
        ledger: str,
        backend: str,
        pg_dsn: str | None,
        command: Any = None,
        lease_ttl_s: float | None = None,
        config: TrialConfig | None = None,
    ) -> Iterator[RunInfra]:
        """The run's infrastructure for ``cells`` (what they need starts now), reaped on
        exit. ``lease_ttl_s`` overrides the target's lease; ``config`` all settings."""
        infra = cls(
            ledger=ledger,
            backend=backend,
            pg_dsn=pg_dsn,
            command=command,
            lease_ttl_s=lease_ttl_s,
            config=config,
        )
        try:
            infra._start(cells)
            yield infra
        finally:
            infra.close()

    def _start(self, cells: Sequence[Cell]) -> None:
        self.watchdog = Watchdog.start(self.run_id)
        from fake_providers import ProviderPool

        self.providers = ProviderPool(guard=self.watchdog)
        self._share_bytecode()
        if self.ledger == "postgres":
            self.pg_dsn = postgres_dsn(self.pg_dsn)
            self.config = replace(self.config, pg_dsn=self.pg_dsn)
            try:
                self.versions["postgres"] = postgres_version(self.pg_dsn)
            except ProbeFailed as exc:
                raise InfrastructureError(f"{exc} or pass --pg-dsn") from None
        if self.backend_name == "docker":
            from harness.backends.docker import DockerBackend

            self.versions["docker"] = docker_version().engine
            self.docker = DockerBackend.for_target(self.command)
        if any(c.network for c in cells):
            self._start_toxiproxy()

    def _share_bytecode(self) -> None:
        """The reference worker's and the providers' processes share one bytecode cache
        (see :mod:`harness.bytecode`) while the run lasts."""
        if self.command is not None or self.backend_name != "process":
            return  # the user's worker, or containers: their environment as it is
        self._stack.enter_context(bytecode.shared_bytecode())

    def ensure_toxiproxy(self) -> None:
        """Start the run's Toxiproxy server if it is not running and was not refused yet
        (open starts it only for the table's network cells; a custom trial asks later)."""
        if self.toxiproxy is None and self.toxiproxy_error is None:
            self._start_toxiproxy()

    def _start_toxiproxy(self) -> None:
        from harness.network import ToxiproxyServer, find_toxiproxy

        try:
            try:
                location = find_toxiproxy()
            except ToxiproxyUnavailable:
                # Last in the design's order: build the pinned server where Go is present.
                if os.environ.get("CRASHPOINT_NO_TOXIPROXY_BUILD") == "1" or not shutil.which("go"):
                    raise
                print(
                    "crashpoint: building the Toxiproxy server once (go install, cached)...",
                    file=sys.stderr,
                    flush=True,
                )
                location = find_toxiproxy(build=True)
            server = ToxiproxyServer(location, watchdog=self.watchdog).start()
            self.versions["toxiproxy"] = server.version()
            self.toxiproxy = server
        except ToxiproxyUnavailable as exc:
            self.toxiproxy_error = str(exc)

    def close(self) -> None:
        if self.zygote is not None:
            # Every trial's backend has stopped its workers by now; it kills what is left.
            self.zygote.close()
            shutil.rmtree(self.zygote.log.parent, ignore_errors=True)
            if self.watchdog is not None:
                self.watchdog.forget_dir(self.zygote.log.parent)
        if self.served is not None:
            self.served.close()
            shutil.rmtree(self.served.log_dir, ignore_errors=True)
            if self.watchdog is not None:
                self.watchdog.forget_dir(self.served.log_dir)
        if self.providers is not None:
            # Before the watchdog goes: no provider outlives the run.
            with contextlib.suppress(Exception):
                self.providers.close()
        if self.toxiproxy is not None:
            with contextlib.suppress(Exception):
                self.toxiproxy.stop()
        self._stack.close()
        if self.watchdog is not None:
            self.watchdog.close()

    def environment(self) -> dict[str, Any]:
        env = base_environment()
        env.update({k: v for k, v in self.versions.items() if v})
        return env

    def make_backend(self, history: History) -> Backend:
        if self.backend_name == "docker":
            backend: Backend = self.docker(
                history=history, watchdog=self.watchdog, run_id=self.run_id
            )
            return backend
        from harness.backends.process import ProcessBackend

        return ProcessBackend(history=history, watchdog=self.watchdog, zygote=self.preloader())

    def preloader(self) -> Zygote | None:
        """The run's zygote for the target's ``[target.preload]`` modules, made once (it
        starts with the first worker it forks); None when nothing is preloaded."""
        if self.command is None or not self.command.preload:
            return None
        with self._zygote_lock:
            if self.zygote is None:
                # The watchdog's from the start, as the served commands' logs are.
                base = Path(tempfile.gettempdir())
                log_dir = fresh_dir(base, self.watchdog, prefix="cp-zygote-")
                self.zygote = Zygote(
                    interpreter_of(self.command.command, self.command.base_dir),
                    self.command.preload,
                    cwd=self.command.base_dir,
                    log=log_dir / "zygote.log",
                    watchdog=self.watchdog,
                    wanted_as=self.command.command[0],
                )
            return self.zygote

    def make_target(self, cell: Cell, trial_dir: Path) -> TargetAdapter:
        if self.command is not None:
            from harness.targets.command import CommandAdapter

            in_image = self.backend_name == "docker" and self.command.docker is not None
            pool = self.served_pool() if self.command.serve_scope == "run" else None
            return CommandAdapter(self.command, trial_dir=trial_dir, in_image=in_image, pool=pool)
        from harness.targets.reference import ReferenceAdapter

        if cell.ledger == "postgres":
            assert self.pg_dsn is not None
            return ReferenceAdapter.postgres(self.pg_dsn, state_dir=trial_dir)
        return ReferenceAdapter.sqlite(state_dir=trial_dir)

    def served_pool(self) -> ServedPool:
        """The run's served processes (``[target.serve] scope = "run"``), made once."""
        with self._served_lock:
            if self.served is None:
                # The watchdog's from the start: its logs go even if the harness is killed.
                base = Path(tempfile.gettempdir())
                self.served = ServedPool(fresh_dir(base, self.watchdog, prefix="cp-serve-"))
            return self.served

    def skipped(self, cells: Sequence[Cell]) -> dict[str, str]:
        """Cells this machine cannot run (what is missing here, not what the target lacks:
        see :mod:`harness.applicable`), with the reason each is skipped."""
        out = {}
        for c in cells:
            if c.network and self.toxiproxy is None:
                out[c.id] = f"no Toxiproxy server: {self.toxiproxy_error}"
            elif c.scenario.wall_clock and (why := faketime.unavailable()) is not None:
                out[c.id] = why
        return out

    def make_network(self, cell: Cell, *, wanted: bool | None = None) -> NetworkSeam | None:
        """The cell's proxies (``wanted`` None: when the cell is a network cell); a server
        that died since the last trial is restarted, and one that cannot be raises
        :class:`ToxiproxyUnavailable` (the trial is skipped)."""
        if not (cell.network if wanted is None else wanted):
            return None
        if wanted:
            self.ensure_toxiproxy()
        if self.toxiproxy is None:
            if wanted:
                raise ToxiproxyUnavailable(self.toxiproxy_error or "no Toxiproxy server")
            return None
        from harness.network import TrialNetwork

        with self._toxiproxy_lock:
            if self.toxiproxy_error is not None:
                raise ToxiproxyUnavailable(self.toxiproxy_error)
            if not self.toxiproxy.alive():
                self._restart_toxiproxy()
        return TrialNetwork(self.toxiproxy, cell)

    def _restart_toxiproxy(self) -> None:
        died = self.toxiproxy.exit_status()
        try:
            self.toxiproxy.restart()
        except ToxiproxyUnavailable as exc:
            self.toxiproxy_error = (
                f"the run's Toxiproxy server died ({died}) and did not restart: {exc}"
            )
            raise ToxiproxyUnavailable(self.toxiproxy_error) from None
        print(
            f"crashpoint: the Toxiproxy server died ({died}); restarted it at {self.toxiproxy.url}",
            file=sys.stderr,
            flush=True,
        )

    # -- opening trials -------------------------------------------------------------------

    def open_trial(self, cell: Cell, seed: int, *, network: bool | None = None) -> Trial:
        """A fresh, not yet set up :class:`Trial` of ``cell`` on this run's backend,
        target, proxies (``network`` None: when the cell is a network cell), watchdog,
        abort and warm providers; its teardown closes its proxies.
        :class:`ToxiproxyUnavailable` when proxies are wanted and cannot be had."""
        net = self.make_network(cell, wanted=network)
        try:
            trial = Trial(
                cell,
                seed=seed,
                config=self.config,
                make_backend=self.make_backend,
                make_target=lambda d: self.make_target(cell, d),
                network=net,
                watchdog=self.watchdog,
                abort=self.abort,
                provider_pool=self.providers,
            )
        except BaseException:
            if net is not None:
                net.close()
            raise
        if self.ledger == "postgres" and self.pg_dsn is not None:
            trial.ledger_server = LedgerServerWatch(self.pg_dsn)
        return trial

    def run_trial(
        self, cell: Cell, seed: int, driver: Driver, *, network: bool | None = None
    ) -> TrialResult:
        """One trial of ``cell`` played by ``driver`` and judged; skipped when its proxies
        cannot be had, inconclusive when its infrastructure failed under it."""
        try:
            trial = self.open_trial(cell, seed, network=network)
        except ToxiproxyUnavailable as exc:
            # The server went away mid-run and could not be had again: the cells still to
            # come are skipped with the reason, never inconclusive noise or a crashed run.
            return skipped_result(cell, seed, f"no Toxiproxy server: {exc}")
        played = play(trial, driver, infrastructure=infrastructure_failure)
        return demoted(played, infrastructure_failure(trial))
