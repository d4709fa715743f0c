"""The crashpoint side of one pytest session: its target, the run it records, the
infrastructure its trials share, and the one report it writes.

Made only when ``--crashpoint`` is given or a test first asks for the ``crashpoint``
fixture (:mod:`harness.pytest_plugin` imports nothing of this otherwise). The
infrastructure (watchdog, Toxiproxy, backend) opens on the first trial and closes at
session end, once per process: under xdist each worker has its own and writes its
trials to ``OUT/.xdist/<worker>/results.json``; the controller merges those with the
code ``crashpoint report`` uses, so a session has one run directory and one report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import shlex
import shutil
import time
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from harness import applicable
from harness.commands.matrix import MatrixOptions
from harness.commands.session_report import merge_shards, trial_page, write_session, write_shard
from harness.contract.errors import ConfigError, CrashpointError, ToxiproxyUnavailable
from harness.infra import RunInfra
from harness.plan import Cell
from harness.pytest_items import CellFailed, CellItem, TargetNode
from harness.pytest_options import REFERENCE, Settings, read_settings
from harness.results import new_run_id, replay_command, results_document, summarize
from harness.runner import RunSpec, run_one, run_spec, skipped_result
from harness.scenario_api import ScenarioTrial, custom_cell, open_trial, provider_kind
from harness.targets.config import CommandConfig, load_config
from harness.trial_run import TrialResult, trial_seed

PLUGIN_NAME = "crashpoint-session"
#: ``workeroutput`` key a worker names its shard's results.json under (the plugin module
#: reads the same key, without importing this one).
SHARD_KEY = "crashpoint_shard"
#: ``workerinput`` key the controller hands the session's seed and run id down under.
SESSION_KEY = "crashpoint_session"
SHARDS_DIR = ".xdist"
#: Keyword arguments ``@pytest.mark.crashpoint(...)`` gives the fixture's trial.
MARKER_KEYS = ("provider", "network", "description")
CALL_FAILED = pytest.StashKey[bool]()


def session_of(config: pytest.Config) -> CrashpointSession:
    """The session's crashpoint state, made and registered on first use."""
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if plugin is None:
        plugin = CrashpointSession(config, read_settings(config))
        config.pluginmanager.register(plugin, PLUGIN_NAME)
    assert isinstance(plugin, CrashpointSession)
    return plugin


def activate(config: pytest.Config) -> None:
    """``--crashpoint`` is on: check the options and the target now, as usage errors."""
    session = session_of(config)
    try:
        session.load_target()
        session.cells = session.matrix_cells()
    except ConfigError as exc:
        raise pytest.UsageError(f"crashpoint: {exc}") from None


def add_shard(config: pytest.Config, path: str) -> None:
    """A worker wrote ``path``: the controller merges it at session end."""
    session_of(config).shards.append(Path(path))


def scenario_fixture(request: pytest.FixtureRequest) -> Iterator[ScenarioTrial]:
    """The ``crashpoint`` fixture: a started custom trial, recorded at teardown."""
    marker = request.node.get_closest_marker("crashpoint")
    options: dict[str, Any] = dict(marker.kwargs) if marker else {}
    unknown = sorted(set(options) - set(MARKER_KEYS))
    if unknown or (marker is not None and marker.args):
        pytest.fail(
            f"@pytest.mark.crashpoint takes keyword arguments {', '.join(MARKER_KEYS)}; "
            f"got {', '.join(unknown) or repr(marker.args if marker else ())}",
            pytrace=False,
        )
    session = session_of(request.config)
    try:
        session.load_target()
    except ConfigError as exc:
        pytest.fail(f"crashpoint: {exc}", pytrace=False)
    with session.custom_trial(request.node, **options) as trial:
        yield trial


class CrashpointSession:
    """A pytest plugin object: one per session (per xdist worker)."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.inconclusive = settings.inconclusive
        workerinput: dict[str, Any] = getattr(config, "workerinput", {})
        self.worker_id: str | None = workerinput.get("workerid")
        handed = workerinput.get(SESSION_KEY) or {}
        seed = settings.seed if settings.seed is not None else random.randrange(2**31)
        self.seed: int = handed.get("seed", seed)
        self.run_id: str = handed.get("run_id") or new_run_id()
        self.command: CommandConfig | None = None
        self.config_path: Path | None = None
        self.target_doc: dict[str, Any] = {}
        self._loaded = False
        self.cells: list[Cell] = []
        self.selected: list[Cell] = []
        self.entries: list[dict[str, Any]] = []
        self.shards: list[Path] = []
        self.summary_line: str | None = None
        self.started = time.time()
        self._stack = contextlib.ExitStack()
        self._spec: RunSpec | None = None
        self._infra: RunInfra | None = None
        self._broken: str | None = None
        #: Cells left out of the matrix as not applicable to the target (id -> reason).
        self.not_applicable: dict[str, str] = {}

    # -- target and cells -------------------------------------------------------------

    def load_target(self) -> None:
        """Find and check the target's configuration (once); ``ConfigError`` if bad."""
        if self._loaded:
            return
        path = self.settings.target_path(self.config.rootpath)
        if path is None:
            self.target_doc = {"name": REFERENCE, "kind": REFERENCE, "mutant": None}
        else:
            self.command = load_config(path)
            self.config_path = self.command.path
            self.target_doc = {"name": self.command.name, "kind": "command", "mutant": None}
        self._loaded = True

    def matrix_cells(self) -> list[Cell]:
        """The cells the filters leave, as ``crashpoint run`` would choose them."""
        s = self.settings
        opts = MatrixOptions(
            scenarios=s.scenarios,
            points=s.points,
            providers=s.providers,
            signals=s.signals,
            ledger=s.ledger,
            backend=s.backend,
        )
        if self.command is not None:
            # Every declared provider gets its cells, as under `crashpoint run -c`.
            declared = [(p.name, p.kind) for p in self.command.providers]
            opts = dataclasses.replace(opts, declared=declared, steps=self.command.steps)
        # Cells that cannot apply to the target become no items: they are listed once in
        # the session's summary, never reported as skipped tests.
        cells, self.not_applicable = applicable.split(opts.cells(), self.command)
        return cells

    @property
    def label(self) -> str:
        """The collector's node id: the configuration file, or ``crashpoint:reference``."""
        if self.config_path is None:
            return f"crashpoint:{REFERENCE}"
        with contextlib.suppress(ValueError):
            return self.config_path.relative_to(self.config.rootpath).as_posix()
        return self.config_path.as_posix()

    # -- running trials ---------------------------------------------------------------

    def spec(self) -> RunSpec:
        """The run's spec, opening the infrastructure on first use."""
        if self._spec is not None:
            return self._spec
        if self._broken is not None:
            raise CellFailed(self._broken)
        s = self.settings
        try:
            infra = self._stack.enter_context(
                RunInfra.open(
                    self.selected,
                    ledger=s.ledger,
                    backend=s.backend,
                    pg_dsn=s.pg_dsn,
                    command=self.command,
                    lease_ttl_s=self.settings.lease_ttl_s,
                )
            )
        except CrashpointError as exc:
            self._broken = f"crashpoint infrastructure: {type(exc).__name__}: {exc}"
            raise CellFailed(self._broken) from None
        spec = run_spec(
            infra,
            self.selected,
            seed=self.seed,
            command="pytest",
            jobs=1,
            target=self.target_doc,
        )
        if self.config_path is not None:
            spec.replay_flags = ["-c", str(self.config_path), *spec.replay_flags]
        self._infra, self._spec = infra, spec
        return spec

    def run_cell(self, cell: Cell) -> tuple[TrialResult, str]:
        spec = self.spec()
        result = run_one(spec, cell)
        replay = replay_command(spec, cell)
        self.entries.append(result.to_json(replay))
        return result, replay

    def page_of(self, trial_id: str) -> Path:
        return trial_page(self.settings.out, trial_id)

    @contextlib.contextmanager
    def custom_trial(
        self,
        item: pytest.Item,
        *,
        provider: str | None = None,
        network: bool = False,
        description: str | None = None,
    ) -> Iterator[ScenarioTrial]:
        self.spec()
        assert self._infra is not None
        try:
            kind = provider_kind(self.command, provider)
        except ConfigError as exc:
            pytest.fail(f"crashpoint: {exc}", pytrace=False)
        doc = getattr(getattr(item, "obj", None), "__doc__", None)
        # The node id, not the name: two files may each have a test of one name.
        cell = custom_cell(
            item.nodeid,
            provider=kind,
            ledger=self.settings.ledger,
            backend=self.settings.backend,
            description=description or (doc.strip().splitlines()[0] if doc else None),
        )
        replay = self.custom_replay(item)
        seed = trial_seed(self.seed, cell)
        try:
            trial = open_trial(
                self._infra,
                cell,
                seed=seed,
                network=network,
                page=self.page_of(cell.id),
                replay=replay,
            )
        except ToxiproxyUnavailable as exc:
            self.entries.append(skipped_result(cell, seed, str(exc)).to_json(replay))
            pytest.skip(f"crashpoint: no Toxiproxy server for this trial's network: {exc}")
        trial.name = item.name
        try:
            yield trial.start()
        finally:
            judged_by_test = trial.verdict is not None
            verdict = trial.close()
            self.entries.append(trial.result().to_json(replay))
        # Judged here, not by the test: a violation must still fail it.
        if not judged_by_test and not verdict.held and not item.stash.get(CALL_FAILED, False):
            pytest.fail(str(verdict), pytrace=False)

    def custom_replay(self, item: pytest.Item) -> str:
        parts = ["pytest", item.nodeid, "--crashpoint-seed", str(self.seed)]
        if self.config_path is not None:
            parts += ["--crashpoint-config", str(self.config_path)]
        else:
            parts += ["--crashpoint-config", REFERENCE]
        return shlex.join(parts)

    def document(self) -> dict[str, Any]:
        """This process's results document: every trial it ran, in the order run."""
        assert self._spec is not None
        assert self._infra is not None
        doc = results_document(
            self._spec, [], started=self.started, environment=self._infra.environment()
        )
        doc["run_id"] = self.run_id
        doc["trials"] = list(self.entries)
        doc["summary"] = summarize(self.entries)
        return doc

    # -- pytest hooks -------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: every worker records under the controller's seed and run id."""
        node.workerinput[SESSION_KEY] = {"seed": self.seed, "run_id": self.run_id}

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        # The target is one more collector of the session, beside the test files: its
        # cells are collected, counted, deselected (-k, -m, --lf) and distributed (xdist)
        # exactly like any other test.
        report = yield
        if self.settings.items and isinstance(collector, pytest.Session) and report.passed:
            assert isinstance(report.result, list)
            report.result.append(
                TargetNode.from_parent(
                    collector,
                    name=self.label,
                    nodeid=self.label,
                    path=self.config_path or self.config.rootpath,
                    cells=self.cells,
                    runner=self,
                )
            )
        return report

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # What this process may run; the infrastructure starts only what these need.
        self.selected = [i.cell for i in session.items if isinstance(i, CellItem)]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if report.when == "call":
            item.stash[CALL_FAILED] = bool(report.failed)
        return report

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._stack.close()
        out = self.settings.out
        if self.worker_id is not None:
            if self.entries:
                shard = out / SHARDS_DIR / self.worker_id / "results.json"
                path = write_shard(self.document(), shard)
                self.config.workeroutput[SHARD_KEY] = str(path)  # type: ignore[attr-defined]
            return
        try:
            if self.shards:
                counts: Mapping[str, int] = merge_shards(self.shards, out)
                shutil.rmtree(out / SHARDS_DIR, ignore_errors=True)
            elif self.entries:
                write_session(self.document(), out)
                counts = summarize(self.entries)
            else:
                return
        except CrashpointError as exc:
            self.summary_line = f"the report could not be written: {exc}"
            return
        self.summary_line = (
            f"{counts['total']} trials: {counts['held']} held, {counts['violated']} violated, "
            f"{counts['inconclusive']} inconclusive, {counts['skipped']} skipped "
            f"-> {out / 'index.html'}"
        )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.summary_line is not None:
            terminalreporter.write_line(f"crashpoint: {self.summary_line}")
        left_out = applicable.summary_line(applicable.grouped(self.not_applicable))
        if left_out is not None and self.worker_id is None:
            terminalreporter.write_line(f"crashpoint: {left_out}")
