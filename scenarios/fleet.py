"""Reference worker processes for tests and benchmarks: start, signal, restart, reap.

Each worker runs in its own session, so a signal to its process group reaches the whole
tree (the worker and anything it spawned) and nothing reaches the caller. The harness has
its own backends; this is the small, dependency-free version for our own test tiers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scenarios.reference import ReferenceTarget
from scenarios.worker.config import ProviderSpec


@dataclass
class WorkerProc:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def signal(self, sig: int) -> None:
        """Signal the worker's whole process group (no-op once it is reaped)."""
        # Once reaped, the group id may be reused by an unrelated process: leave it be.
        if self.popen.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass
class Fleet:
    """Workers of one target; ``with Fleet(...) as fleet:`` reaps them all on exit."""

    target: ReferenceTarget
    providers: Mapping[str, ProviderSpec | tuple[str, str]]
    #: Worker settings passed to every ``worker_env`` call (lease_ttl_s=..., poll_s=...).
    settings: Mapping[str, Any] = field(default_factory=dict)
    workers: dict[str, WorkerProc] = field(default_factory=dict)
    _count: int = 0

    def start(self, name: str | None = None, **overrides: Any) -> WorkerProc:
        self._count += 1
        name = name or f"w{self._count}"
        env = dict(os.environ)
        env.pop("CRASHPOINT_FAILPOINTS", None)
        env.pop("CRASHPOINT_RECOVERY", None)
        env.update(
            self.target.worker_env(name, providers=self.providers, **{**self.settings, **overrides})
        )
        # The worker imports the same source tree as this process, whatever its cwd.
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        log_path = self.target.state_dir / f"{name}-{self._count}.log"
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                self.target.worker_argv(),
                env=env,
                cwd=self.target.state_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc = WorkerProc(name, popen, log_path)
        self.workers[f"{name}#{self._count}"] = proc
        return proc

    def stop_all(self, *, timeout_s: float = 3.0) -> None:
        """SIGTERM every worker, then SIGKILL what is left, and reap them all."""
        live = [w for w in self.workers.values() if w.alive()]
        for w in live:
            w.signal(signal.SIGCONT)  # a stopped process cannot act on SIGTERM
            w.signal(signal.SIGTERM)
        for w in live:
            try:
                w.popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                w.signal(signal.SIGKILL)
                w.popen.wait()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()
