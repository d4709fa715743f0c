"""The ``Backend`` seam: start a worker, signal it, pause it, wait for it, reap it.

Exit statuses follow :mod:`subprocess`: ``0..255`` for a normal exit, ``-N`` for death by
signal ``N``. Every backend reports in that convention so a trial compares them directly.
"""

from __future__ import annotations

import signal as _signal
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from harness.history import History


class ExitWatch:
    """The exit bookkeeping both handles share: a waiter thread sets ``_exited`` once it
    has stored ``_returncode`` and ``_exited_at``, so readers never see one without the
    other."""

    _started_at: float
    _exited_at: float | None
    _returncode: int | None
    _exited: threading.Event

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


@runtime_checkable
class WorkerHandle(Protocol):
    """One running worker (a process tree or a container)."""

    @property
    def name(self) -> str: ...

    @property
    def pid(self) -> int:
        """Host pid of the worker's top process."""
        ...

    @property
    def started_at(self) -> float:
        """``time.monotonic()`` when the worker was started."""
        ...

    @property
    def exited_at(self) -> float | None:
        """``time.monotonic()`` when the exit was observed, ``None`` while running."""
        ...

    @property
    def returncode(self) -> int | None:
        """Exit status (see the module docstring), ``None`` while running."""
        ...

    def signal(self, sig: int) -> None:
        """Deliver ``sig`` to the whole worker tree."""
        ...

    def pause(self) -> None:
        """Freeze the whole tree (SIGSTOP or the cgroup freezer)."""
        ...

    def resume(self) -> None:
        """Thaw what :meth:`pause` froze."""
        ...

    def wait(self, timeout_s: float) -> int | None:
        """Exit status once exited, or ``None`` if still running after ``timeout_s``."""
        ...

    def alive(self) -> bool: ...

    def tree(self) -> list[int]:
        """Host pids of the live leader and every live process it contains (its
        cgroup's, or its descendants'), a daemon that left the process group too."""
        ...

    def stop(self, timeout_s: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout_s``; reap everything; the exit status."""
        ...


@runtime_checkable
class Backend(Protocol):
    """Starts workers; :meth:`close` reaps every worker it started."""

    name: str

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | Path,
    ) -> WorkerHandle:
        """Start ``argv`` in ``cwd`` with exactly ``env`` as its environment."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class LogsApart(Protocol):
    """A backend that can write a worker's logs somewhere other than its working
    directory (a command target's worker runs in a state directory a restore replaces)."""

    def start_with_logs(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | Path,
        log_dir: str | Path,
    ) -> WorkerHandle:
        """:meth:`Backend.start`, with ``<name>.stdout.log`` and ``<name>.stderr.log`` in
        ``log_dir``."""
        ...


def describe_exit(returncode: int | None) -> str:
    """``"exit 0"``, ``"killed by SIGKILL"`` or ``"running"`` for logs and reports."""
    if returncode is None:
        return "running"
    if returncode < 0:
        try:
            return f"killed by {_signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit {returncode}"


def signal_name(sig: int) -> str:
    try:
        return _signal.Signals(sig).name
    except ValueError:
        return str(sig)


def record_escalation(
    history: History | None, worker: str, pid: int, *, sent: int | str, grace_s: float
) -> None:
    """Say in the history that ``sent`` was not enough: after ``grace_s`` the worker was
    still running, so SIGKILL follows (the caller sends it right after)."""
    if history is None:
        return
    name = sent if isinstance(sent, str) else signal_name(sent)
    history.append(
        "supervisor",
        "escalate",
        worker=worker,
        pid=pid,
        signal=name,
        then="SIGKILL",
        grace_s=round(grace_s, 3),
        text=f"{worker} outlived {name} for {grace_s:g} s, so SIGKILL was sent",
    )
