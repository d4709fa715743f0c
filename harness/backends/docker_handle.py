"""A worker container seen from the host: its signals, its process tree, its exit.

The engine reports a container's exit as ``128+N``; this handle turns that into the
``-N`` :mod:`subprocess` reports when we sent signal ``N``, so both backends' exits read
the same in the history. Logs are copied out before removal because they are evidence.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from harness.backends.base import ExitWatch, describe_exit, record_escalation, signal_name
from harness.contract.errors import InfrastructureError
from harness.history import History


def _ppid(proc: psutil.Process) -> int | None:
    """``proc``'s parent, None once it exited: a member may exit between the listing of
    the tree and this read (CI run 28: a stop then raised and left the container)."""
    try:
        return proc.ppid()
    except psutil.Error:
        return None


class DockerHandle(ExitWatch):
    """A worker container; see :class:`harness.backends.base.WorkerHandle`."""

    def __init__(
        self,
        name: str,
        container: Any,
        *,
        init: bool,
        cwd: Path,
        history: History | None,
    ) -> None:
        self._name = name
        self.container = container
        self._init = init
        self._history = history
        self._started_at = time.monotonic()
        self._exited_at: float | None = None
        self._returncode: int | None = None
        self.engine_exit_code: int | None = None
        self._exited = threading.Event()
        self._sent: set[int] = set()
        self._removed = False
        self.stdout_path, self.stderr_path = cwd / f"{name}.stdout.log", cwd / f"{name}.stderr.log"
        with contextlib.suppress(Exception):
            container.reload()
        self._pid = int(container.attrs.get("State", {}).get("Pid") or 0)
        self._waiter = threading.Thread(
            target=self._watch_exit, name=f"crashpoint-docker-wait-{name}", daemon=True
        )
        self._waiter.start()

    @property
    def name(self) -> str:
        return self._name

    @property
    def pid(self) -> int:
        """Host pid of the container's first process (0 if it exited before we looked)."""
        return self._pid

    def signal(self, sig: int) -> None:
        if self._history is not None:
            self._history.append(
                "supervisor", "signal", worker=self._name, pid=self._pid, signal=signal_name(sig)
            )
        self._deliver(sig)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def _deliver(self, sig: int) -> None:
        import docker.errors

        if not self.alive():
            return
        self._sent.add(sig)
        try:
            if sig == signal.SIGSTOP:
                self.container.pause()
            elif sig == signal.SIGCONT:
                if self._status() == "paused":
                    self.container.unpause()
            elif sig == signal.SIGKILL:
                self.container.kill(signal="SIGKILL")
            else:
                for proc in self._descendants():
                    with contextlib.suppress(psutil.Error):
                        proc.send_signal(sig)
                self.container.kill(signal=signal_name(sig))
        except docker.errors.APIError as exc:
            if self.alive() and self._status() == "running":
                raise InfrastructureError(
                    f"the engine refused {signal_name(sig)} for worker {self._name!r} "
                    f"(container {self.container.name}): {exc}"
                ) from exc

    def tree(self) -> list[int]:
        if self._exited.is_set() or self._pid <= 0:
            return []
        return [self._pid, *(p.pid for p in self._members())]

    def _members(self) -> list[psutil.Process]:
        """Every process under the container's first one, as the host sees them."""
        if self._pid <= 0:
            # Never look up pid 0: on Linux its "children" are every process on the host.
            return []
        try:
            return list(psutil.Process(self._pid).children(recursive=True))
        except psutil.Error:
            return []

    def _descendants(self) -> list[psutil.Process]:
        """The worker's processes seen from the host, minus those the engine signals."""
        # init forwards the engine's signal to its direct children; don't send it twice.
        return [p for p in self._members() if not (self._init and _ppid(p) == self._pid)]

    def _status(self) -> str:
        try:
            self.container.reload()
            return str(self.container.status)
        except Exception:
            return "gone"

    def stop(self, timeout_s: float = 5.0) -> int | None:
        if self.alive():
            if self._status() == "paused":
                self.container.unpause()  # a frozen worker cannot act on SIGTERM
            self._deliver(signal.SIGTERM)
            if self.wait(timeout_s) is None:
                record_escalation(
                    self._history, self._name, self._pid, sent=signal.SIGTERM, grace_s=timeout_s
                )
                self._deliver(signal.SIGKILL)
                self.wait(timeout_s)
        self._remove()
        return self._returncode

    def _watch_exit(self) -> None:
        try:
            code = int(self.container.wait()["StatusCode"])
        except Exception:  # removed under us: the exit was not observed
            code = None
        self._exited_at = time.monotonic()
        self.engine_exit_code = code
        if code is not None and code > 128 and (code - 128) in self._sent:
            self._returncode = -(code - 128)
        else:
            self._returncode = code
        self._save_logs()
        if self._history is not None:
            self._history.append(
                f"worker:{self._name}",
                "worker_exit",
                t=self._exited_at,
                worker=self._name,
                pid=self._pid,
                returncode=self._returncode,
                status=describe_exit(self._returncode),
                container=self.container.short_id,
            )
        self._exited.set()

    def _save_logs(self) -> None:
        """Worker logs are evidence: copy them out before the container is removed."""
        with contextlib.suppress(Exception):
            self.stdout_path.write_bytes(self.container.logs(stdout=True, stderr=False))
            self.stderr_path.write_bytes(self.container.logs(stdout=False, stderr=True))

    def _remove(self) -> None:
        if self._removed:
            return
        self._exited.wait(10.0)
        with contextlib.suppress(Exception):
            # v: an anonymous volume (an image's VOLUME) goes with its container.
            self.container.remove(force=True, v=True)
        self._removed = True
