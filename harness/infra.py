"""Per-run infrastructure: the watchdog, the Toxiproxy server, PostgreSQL, the backend.

Heavy pieces start only when a chosen cell needs them (as pytest-xdist creates its state
only when switched on). What cannot be had turns the cells that need it into ``skipped``
trials carrying the reason and the command that fixes it; it never fails a run that
does not need it, and never passes a cell that does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import applicable, bytecode, clock
from harness.backends.base import Backend
from harness.contract.errors import InfrastructureError, ToxiproxyUnavailable
from harness.history import History
from harness.jobs import resolve_jobs
from harness.plan import Cell
from harness.probes import ProbeFailed, docker_version, postgres_dsn, postgres_version
from harness.results import base_environment
from harness.runner import RunSpec
from harness.target import TargetAdapter
from harness.targets.reference import reference_lease_s
from harness.trial import TrialConfig
from harness.watchdog import Watchdog

if TYPE_CHECKING:
    from fake_providers import ProviderPool


class RunInfra:
    """What one run shares between its trials; a context manager that reaps it all."""

    def __init__(
        self, *, ledger: str, backend: str, pg_dsn: str | None, command: Any = None
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
        self.versions: dict[str, str | None] = {}
        #: Undoes what the run set up in this process (the shared bytecode cache).
        self._stack = contextlib.ExitStack()

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
    ) -> Iterator[RunInfra]:
        infra = cls(ledger=ledger, backend=backend, pg_dsn=pg_dsn, command=command)
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

        return ProcessBackend(history=history, watchdog=self.watchdog)

    def make_target(self, cell: Cell, trial_dir: Path) -> TargetAdapter:
        if self.command is not None:
            from harness.targets.command import CommandAdapter

            in_image = self.backend_name == "docker" and self.command.docker is not None
            return CommandAdapter(self.command, trial_dir=trial_dir, in_image=in_image)
        from harness.targets.reference import ReferenceAdapter

        if cell.ledger == "postgres":
            assert self.pg_dsn is not None
            return ReferenceAdapter.postgres(self.pg_dsn, state_dir=trial_dir)
        return ReferenceAdapter.sqlite(state_dir=trial_dir)

    def skipped(self, cells: Sequence[Cell]) -> dict[str, str]:
        """Cells this machine cannot run (what is missing here, not what the target lacks:
        see :mod:`harness.applicable`), with the reason each is skipped."""
        out = {}
        for c in cells:
            if c.network and self.toxiproxy is None:
                out[c.id] = f"no Toxiproxy server: {self.toxiproxy_error}"
            elif c.scenario.wall_clock and (why := clock.unavailable()) is not None:
                out[c.id] = why
        return out

    def make_network(self, cell: Cell) -> Any:
        """The cell's proxies' home; a server that died since the last cell is restarted,
        and one that cannot be raises :class:`ToxiproxyUnavailable` (the cell is skipped)."""
        if not cell.network or self.toxiproxy is None:
            return None
        from harness.network import TrialNetwork

        with self._toxiproxy_lock:
            if self.toxiproxy_error is not None:
                raise ToxiproxyUnavailable(self.toxiproxy_error)
            if not self.toxiproxy.alive():
                died = self.toxiproxy.exit_status()
                try:
                    self.toxiproxy.restart()
                except ToxiproxyUnavailable as exc:
                    self.toxiproxy_error = (
                        f"the run's Toxiproxy server died ({died}) and did not restart: {exc}"
                    )
                    raise ToxiproxyUnavailable(self.toxiproxy_error) from None
                print(
                    f"crashpoint: the Toxiproxy server died ({died}); "
                    f"restarted it at {self.toxiproxy.url}",
                    file=sys.stderr,
                    flush=True,
                )
        return TrialNetwork(self.toxiproxy, cell)

    def spec(
        self,
        cells: Sequence[Cell],
        *,
        seed: int,
        config: TrialConfig,
        command: str,
        jobs: int | None,
        target: dict[str, Any],
    ) -> RunSpec:
        """The run of ``cells``; ``jobs`` None is the default width (``harness.jobs``)."""
        cells, not_applicable = applicable.split(cells, self.command)
        replay: list[str] = []
        if config.lease_ttl_s != reference_lease_s(self.backend_name):
            replay += ["--lease-ttl-s", str(config.lease_ttl_s)]
        return RunSpec(
            cells=cells,
            seed=seed,
            config=config,
            make_backend=self.make_backend,
            make_target=self.make_target,
            target=target,
            command=command,
            jobs=resolve_jobs(jobs, len(cells), backend=self.backend_name),
            skipped=self.skipped(cells),
            not_applicable=not_applicable,
            make_network=self.make_network,
            replay_flags=replay,
            watchdog=self.watchdog,
            providers=self.providers,
        )
