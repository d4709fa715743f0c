"""Workers as local process trees.

Each worker is the leader of its own session and process group, and is contained as a
whole tree by a :class:`Tree`: its own cgroup v2 where the machine allows
(:mod:`harness.backends.cgroup`: ``cgroup.kill``, ``cgroup.freeze``, nothing escapes), else
its process group plus every descendant psutil has seen (:mod:`harness.backends.pgroup`).
Each ``worker_start`` event says which (``containment``).

The leader's exit is observed with ``waitid(WNOWAIT)``: the exit time and status are
recorded the moment it happens, but the zombie is kept until :meth:`ProcessHandle.stop`
or :meth:`ProcessBackend.close`. While the zombie exists its pid, and so its process
group id, cannot be reused, so a late ``killpg`` can never reach a stranger.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.backends.base import (
    Backend,
    ExitWatch,
    WorkerHandle,
    describe_exit,
    record_escalation,
    signal_name,
)
from harness.backends.cgroup import Cgroup, CgroupTree, enter_argv, open_root, runnable, wanted
from harness.backends.leader import Leader, PopenLeader
from harness.backends.pgroup import GroupTree
from harness.backends.zygote import Zygote, ZygoteUnavailable
from harness.contract.env import CONTAINMENT
from harness.contract.errors import InfrastructureError
from harness.history import History
from harness.watchdog import Watchdog

_REAP_WAIT_S = 2.0


class Tree(Protocol):
    """How one worker's whole tree is reached (a cgroup, or a process group)."""

    #: ``"cgroup2"`` or ``"process_group"``: recorded on the worker's start event.
    kind: str

    def send(self, sig: int) -> None:
        """``sig`` to every member; SIGSTOP and SIGCONT freeze and thaw the tree."""
        ...

    def pids(self) -> list[int]:
        """Live members besides the leader (or including it: callers dedupe)."""
        ...

    def release(self) -> None:
        """The leader's zombie was reaped."""
        ...

    def settle(self, timeout_s: float) -> bool:
        """After a kill: wait until every member is gone; True if they all went."""
        ...


class ProcessHandle(ExitWatch):
    """A worker process tree; see :class:`harness.backends.base.WorkerHandle`."""

    def __init__(
        self,
        name: str,
        leader: Leader,
        *,
        history: History | None,
        watchdog: Watchdog | None,
        log_paths: tuple[Path, Path],
        slot: Cgroup | None = None,
    ) -> None:
        self._name = name
        self._leader = leader
        self._history = history
        self._watchdog = watchdog
        self.stdout_path, self.stderr_path = log_paths
        self._started_at = time.monotonic()
        self._exited_at: float | None = None
        self._returncode: int | None = None
        self._exited = threading.Event()
        self._reaped = False
        self._lock = threading.Lock()
        self._tree: Tree = (
            CgroupTree(slot) if slot is not None else GroupTree(leader.pid, self._exited)
        )
        self._waiter = threading.Thread(
            target=self._watch_exit, name=f"crashpoint-wait-{name}", daemon=True
        )
        self._waiter.start()

    @property
    def name(self) -> str:
        return self._name

    @property
    def pid(self) -> int:
        return self._leader.pid

    @property
    def containment(self) -> str:
        """``"cgroup2"`` or ``"process_group"``."""
        return self._tree.kind

    @property
    def cgroup(self) -> Path | None:
        """The worker's own cgroup directory, under cgroup v2 containment."""
        return self._tree.slot.path if isinstance(self._tree, CgroupTree) else None

    def signal(self, sig: int) -> None:
        if self._history is not None:
            self._history.append(
                "supervisor",
                "signal",
                worker=self._name,
                pid=self.pid,
                signal=signal_name(sig),
                containment=self.containment,
            )
        self._deliver(sig)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def tree(self) -> list[int]:
        """Pids of the leader (unless exited) and every live member of its tree."""
        pids = [] if self._exited.is_set() else [self.pid]
        return pids + [p for p in self._tree.pids() if p != self.pid]

    def stop(self, timeout_s: float = 5.0) -> int | None:
        if self.alive():
            self._deliver(signal.SIGTERM)
            self._deliver(signal.SIGCONT)  # a stopped tree cannot act on SIGTERM
            if self.wait(timeout_s) is None:
                record_escalation(
                    self._history, self._name, self.pid, sent=signal.SIGTERM, grace_s=timeout_s
                )
                self._deliver(signal.SIGKILL)
                self.wait(timeout_s)
        self._reap()
        return self._returncode

    def _deliver(self, sig: int) -> None:
        with self._lock:
            if not self._reaped:
                self._tree.send(sig)

    def _watch_exit(self) -> None:
        ended = self._leader.wait_exit()
        self._exited_at, self._returncode = ended.t, ended.returncode
        extra: dict[str, Any] = {"note": ended.note} if ended.note else {}
        if self._history is not None:
            self._history.append(
                f"worker:{self._name}",
                "worker_exit",
                t=self._exited_at,
                worker=self._name,
                pid=self.pid,
                returncode=self._returncode,
                status=describe_exit(self._returncode),
                **extra,
            )
        self._exited.set()

    def _reap(self) -> None:
        """Kill what is left of the tree, then release the zombie leader."""
        with self._lock:
            if self._reaped:
                return
            self._exited.wait()
            # Leftovers: a daemon the worker left behind dies with the trial. (The zombie
            # still pins the pgid for the fallback's killpg.)
            self._tree.send(signal.SIGKILL)
            self._leader.reap()
            self._reaped = True
            self._tree.release()
            self._tree.settle(_REAP_WAIT_S)
        if self._watchdog is not None:
            self._watchdog.forget_group(self.pid)


class ProcessBackend:
    """Runs each worker as a local process tree; :meth:`close` reaps them all.

    ``containment`` is ``auto``, ``cgroup2`` or ``process_group`` (see
    :mod:`harness.backends.cgroup`); None reads ``CRASHPOINT_CONTAINMENT``.
    """

    name = "process"

    def __init__(
        self,
        *,
        history: History | None = None,
        watchdog: Watchdog | None = None,
        containment: str | None = None,
        zygote: Zygote | None = None,
    ):
        self._history = history
        #: The run's preloaded interpreter (``[target.preload]``); None: every start cold.
        self._zygote = zygote
        self._watchdog = watchdog
        self._choice = wanted(containment or os.environ.get(CONTAINMENT))
        self._handles: list[ProcessHandle] = []
        self._root: Cgroup | None = None
        #: Why the fallback is used ("" while undecided or under cgroup v2).
        self.fallback_reason = ""
        self._opened = False

    @property
    def containment(self) -> str:
        """The mechanism the next worker gets (decided at the first start)."""
        self._open()
        return CgroupTree.kind if self._root is not None else GroupTree.kind

    def _open(self) -> None:
        if self._opened:
            return
        self._root, self.fallback_reason = open_root(self._choice)
        self._opened = True
        if self._root is not None and self._watchdog is not None:
            self._watchdog.watch_cgroup(self._root.path)

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
        paths = logs / f"{name}.stdout.log", logs / f"{name}.stderr.log"
        self._open()
        cold = self._zygote.cold_reason(argv, env, cwd) if self._zygote is not None else None
        run = list(argv)
        if self._root is not None and not runnable(run, env, cwd):
            # Behind the shim, only "exit 127" would say so.
            missing = FileNotFoundError(f"{(run or [''])[0]!r} is not a program")
            raise _not_started(name, argv, cwd, missing)
        slot = self._root.child(f"{name}-{len(self._handles)}") if self._root is not None else None
        try:
            leader, cold = self._spawn(run, env=env, cwd=cwd, logs=paths, slot=slot, cold=cold)
        except OSError as exc:
            if slot is not None:
                slot.remove()
            raise _not_started(name, argv, cwd, exc) from exc
        if self._watchdog is not None:
            self._watchdog.watch_group(leader.pid)
        handle = ProcessHandle(
            name,
            leader,
            history=self._history,
            watchdog=self._watchdog,
            log_paths=paths,
            slot=slot,
        )
        self._handles.append(handle)
        self._record_start(handle, argv, cold)
        return handle

    def _spawn(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        logs: tuple[Path, Path],
        slot: Cgroup | None,
        cold: str | None,
    ) -> tuple[Leader, str | None]:
        """The worker's leader, forked from the run's zygote where it can stand in for a
        start, else started; and why it started cold (None: it was forked)."""
        if self._zygote is not None and cold is None:
            procs = slot.procs_file if slot is not None else None
            try:
                return self._zygote.spawn(argv, env=env, cwd=cwd, logs=logs, procs=procs), None
            except ZygoteUnavailable as exc:
                cold = str(exc)
        run = enter_argv(slot.procs_file, argv, env) if slot is not None else argv
        with open(logs[0], "ab") as out, open(logs[1], "ab") as err:
            proc = subprocess.Popen(
                run,
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        return PopenLeader(proc), cold

    def _record_start(self, handle: ProcessHandle, argv: Sequence[str], cold: str | None) -> None:
        if self._history is None:
            return
        extra: dict[str, Any] = {}
        if self.fallback_reason:
            extra["containment_note"] = self.fallback_reason
        if self._zygote is not None:
            # Preloading declared: each start says whether it was a fork, and if not, why.
            extra["start"] = "cold" if cold is not None else "preloaded"
            extra |= {"cold_reason": cold} if cold is not None else {}
        self._history.append(
            f"worker:{handle.name}",
            "worker_start",
            t=handle.started_at,
            worker=handle.name,
            pid=handle.pid,
            backend=self.name,
            argv=list(argv),
            containment=handle.containment,
            **extra,
        )

    def handles(self) -> list[ProcessHandle]:
        return list(self._handles)

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop every worker still running (TERM, then KILL) and reap them all."""
        for handle in self._handles:
            handle.stop(timeout_s)
        if self._root is not None and self._root.remove():
            if self._watchdog is not None:
                self._watchdog.forget_cgroup(self._root.path)
            self._root = None

    def __enter__(self) -> ProcessBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _not_started(name: str, argv: Sequence[str], cwd: Path, exc: OSError) -> InfrastructureError:
    return InfrastructureError(
        f"could not start worker {name!r} with argv {list(argv)!r} in {cwd}: {exc}; "
        "check that the command exists and the directory is writable"
    )


if TYPE_CHECKING:  # the seam is structural: let the type checker prove conformance
    _backend: type[Backend] = ProcessBackend
    _handle: type[WorkerHandle] = ProcessHandle
    _cgroup_tree: type[Tree] = CgroupTree
    _group_tree: type[Tree] = GroupTree
