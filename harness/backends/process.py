"""Workers as local process trees.

Each worker is the leader of its own session and process group. Signals go to the group
(``killpg``, atomic for every member) and to every descendant psutil has seen, so a child
that called ``setsid`` (an agent's browser, say) still gets them.

The leader's exit is observed with ``waitid(WNOWAIT)``: the exit time and status are
recorded the moment it happens, but the zombie is kept until :meth:`ProcessHandle.stop`
or :meth:`ProcessBackend.close`. While the zombie exists its pid, and so its process
group id, cannot be reused, so a late ``killpg`` can never reach a stranger.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from harness.backends.base import Backend, WorkerHandle, describe_exit, signal_name
from harness.contract.errors import InfrastructureError
from harness.history import History
from harness.watchdog import Watchdog

_REAP_WAIT_S = 2.0


class ProcessHandle:
    """A worker process tree; see :class:`harness.backends.base.WorkerHandle`."""

    def __init__(
        self,
        name: str,
        proc: subprocess.Popen[bytes],
        *,
        history: History | None,
        watchdog: Watchdog | None,
        log_paths: tuple[Path, Path],
    ) -> None:
        self._name = name
        self._proc = proc
        self._history = history
        self._watchdog = watchdog
        self.stdout_path, self.stderr_path = log_paths
        self._started_at = time.monotonic()
        self._exited_at: float | None = None
        self._returncode: int | None = None
        self._exited = threading.Event()
        self._reaped = False
        self._lock = threading.Lock()
        # Every descendant ever seen, so signals reach those that left the process group.
        self._seen: dict[int, psutil.Process] = {}
        self._waiter = threading.Thread(
            target=self._watch_exit, name=f"crashpoint-wait-{name}", daemon=True
        )
        self._waiter.start()

    @property
    def name(self) -> str:
        return self._name

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def started_at(self) -> float:
        return self._started_at

    @property
    def exited_at(self) -> float | None:
        return self._exited_at

    @property
    def returncode(self) -> int | None:
        return self._returncode

    def alive(self) -> bool:
        return not self._exited.is_set()

    def wait(self, timeout_s: float) -> int | None:
        self._exited.wait(timeout_s)
        return self._returncode

    def signal(self, sig: int) -> None:
        if self._history is not None:
            self._history.append(
                "supervisor", "signal", worker=self._name, pid=self.pid, signal=signal_name(sig)
            )
        self._deliver(sig)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def tree(self) -> list[int]:
        """Pids of the leader (unless exited) and every live descendant seen so far."""
        self._refresh_tree()
        pids = [] if self._exited.is_set() else [self.pid]
        return pids + [p.pid for p in self._seen.values() if _running(p)]

    def stop(self, timeout_s: float = 5.0) -> int | None:
        if self.alive():
            self._deliver(signal.SIGTERM)
            self._deliver(signal.SIGCONT)  # a stopped tree cannot act on SIGTERM
            if self.wait(timeout_s) is None:
                self._deliver(signal.SIGKILL)
                self.wait(timeout_s)
        self._reap()
        return self._returncode

    def _deliver(self, sig: int) -> None:
        with self._lock:
            self._refresh_tree()
            if not self._reaped:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, sig)
            for proc in self._seen.values():
                with contextlib.suppress(psutil.Error):
                    proc.send_signal(sig)  # psutil refuses if the pid was reused

    def _refresh_tree(self) -> None:
        if self._exited.is_set():
            return  # the zombie has no children left to list
        try:
            for child in psutil.Process(self.pid).children(recursive=True):
                self._seen.setdefault(child.pid, child)
        except psutil.Error:
            pass

    def _watch_exit(self) -> None:
        info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        self._exited_at = time.monotonic()
        if info is None:  # only with WNOHANG; kept for the type checker
            return
        if info.si_code == os.CLD_EXITED:
            self._returncode = info.si_status
        else:
            self._returncode = -info.si_status
        if self._history is not None:
            self._history.append(
                f"worker:{self._name}",
                "worker_exit",
                t=self._exited_at,
                worker=self._name,
                pid=self.pid,
                returncode=self._returncode,
                status=describe_exit(self._returncode),
            )
        self._exited.set()

    def _reap(self) -> None:
        """Kill what is left of the tree, then release the zombie leader."""
        with self._lock:
            if self._reaped:
                return
            self._exited.wait()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)  # leftovers; the zombie pins the pgid
            for proc in self._seen.values():
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            self._proc.wait()
            self._reaped = True
            # kill() only queues the signal: return once the tree is really gone.
            deadline = time.monotonic() + _REAP_WAIT_S
            while any(_running(p) for p in self._seen.values()) and time.monotonic() < deadline:
                time.sleep(0.005)
        if self._watchdog is not None:
            self._watchdog.forget_group(self.pid)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class ProcessBackend:
    """Runs each worker as a local process tree; :meth:`close` reaps them all."""

    name = "process"

    def __init__(self, *, history: History | None = None, watchdog: Watchdog | None = None):
        self._history = history
        self._watchdog = watchdog
        self._handles: list[ProcessHandle] = []

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | Path,
    ) -> ProcessHandle:
        return self.start_with_logs(name, argv, env=env, cwd=cwd, log_dir=cwd)

    def start_with_logs(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | Path,
        log_dir: str | Path,
    ) -> ProcessHandle:
        cwd, logs = Path(cwd), Path(log_dir)
        out_path, err_path = logs / f"{name}.stdout.log", logs / f"{name}.stderr.log"
        try:
            with open(out_path, "ab") as out, open(err_path, "ab") as err:
                proc = subprocess.Popen(
                    list(argv),
                    env=dict(env),
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
        except OSError as exc:
            raise InfrastructureError(
                f"could not start worker {name!r} with argv {list(argv)!r} in {cwd}: {exc}; "
                "check that the command exists and the directory is writable"
            ) from exc
        if self._watchdog is not None:
            self._watchdog.watch_group(proc.pid)
        handle = ProcessHandle(
            name,
            proc,
            history=self._history,
            watchdog=self._watchdog,
            log_paths=(out_path, err_path),
        )
        self._handles.append(handle)
        if self._history is not None:
            self._history.append(
                f"worker:{name}",
                "worker_start",
                t=handle.started_at,
                worker=name,
                pid=proc.pid,
                backend=self.name,
                argv=list(argv),
            )
        return handle

    def handles(self) -> list[ProcessHandle]:
        return list(self._handles)

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop every worker still running (TERM, then KILL) and reap them all."""
        for handle in self._handles:
            handle.stop(timeout_s)

    def __enter__(self) -> ProcessBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if TYPE_CHECKING:  # the seam is structural: let the type checker prove conformance
    _backend: type[Backend] = ProcessBackend
    _handle: type[WorkerHandle] = ProcessHandle
