"""The run's zygote: workers forked from a process that imported ``[target.preload]``.

A Python worker that imports a framework (the ``mcp`` SDK costs about 0.8 s of CPU)
pays it at every start, and a matrix starts a hundred workers. :class:`Zygote` starts
one process of the worker's own interpreter per run, running
:mod:`harness.backends.zygote_server` by its path; it imports the modules once and
forks each worker, which then runs its script as ``__main__`` the way
``python script.py`` would (its own session, its cgroup joined before its code runs, its
cwd, environment, argv, ``sys.path[0]`` and signal dispositions).

A fork stands in for a start only where it honestly can (:func:`cold_reason`): the same
interpreter, no interpreter flags, and the same interpreter settings (``PYTHON*``,
``LD_*``, ``FAKETIME*``: a clock cell's libfaketime is loaded at exec, so it starts
cold). Every other start, and every start after the zygote failed or died, is a plain
one, and the worker's ``worker_start`` event says which it was and why.

What a fork cannot give back: the hash seed (``PYTHONHASHSEED`` unset: every forked
worker shares the zygote's, where cold ones each draw their own), and a traceback shows
the zygote's frames below the worker's.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.backends.base import describe_exit
from harness.backends.leader import LeaderExit
from harness.group_stop import end_group
from harness.targets.command_output import stderr_tail
from harness.watchdog import Watchdog

SERVER = Path(__file__).with_name("zygote_server.py")
#: Variables read by the interpreter or the loader as it starts: a worker whose differ
#: from the zygote's would not be the process a fork makes.
INTERPRETER_VARS = ("PYTHON", "LD_", "FAKETIME")
#: The imports once per run, on a machine that may be loaded.
READY_TIMEOUT_S = 60.0
#: A fork and its answer; past this the zygote counts as broken.
START_TIMEOUT_S = 10.0
#: A killed orphan's exit, once the zygote that would have reported it is gone.
ORPHAN_WAIT_S = 5.0
CLOSE_GRACE_S = 2.0


class ZygoteUnavailable(Exception):
    """No fork now: the zygote could not start, or died; the message says why."""


def cold_reason(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    cwd: Path,
    interpreter: str,
    zygote_env: Mapping[str, str],
) -> str | None:
    """Why ``argv`` in ``env`` must start cold rather than be forked from a zygote of
    ``interpreter`` started with ``zygote_env``; None when a fork stands in for it."""
    if len(argv) < 2:
        return "argv is not `python script.py` or `python -m module`"
    if _resolve(argv[0], env, cwd) != interpreter:
        return f"{argv[0]!r} is not the preloaded interpreter {interpreter}"
    if argv[1] == "-m" and len(argv) < 3:
        return "argv ends at -m"
    if argv[1] != "-m" and argv[1].startswith("-"):
        return f"interpreter option {argv[1]!r} (a fork takes none)"
    differ = [
        key
        for key in sorted(set(env) | set(zygote_env))
        if key.startswith(INTERPRETER_VARS) and env.get(key) != zygote_env.get(key)
    ]
    if len(differ) == 1:
        return f"{differ[0]} differs from the zygote's"
    return f"{', '.join(differ)} differ from the zygote's" if differ else None


def _resolve(program: str, env: Mapping[str, str], cwd: Path) -> str | None:
    if "/" in program:
        return os.path.abspath(cwd / program)
    return shutil.which(program, path=env.get("PATH", os.defpath))


def interpreter_of(command: Sequence[str], base_dir: Path) -> str | None:
    """The absolute path of ``command[0]`` as the harness would start it, or None."""
    return _resolve(command[0], os.environ, base_dir) if command else None


class ZygoteChild:
    """A worker forked by the zygote; see :class:`harness.backends.leader.Leader`."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self._zygote = zygote
        self._pid = pid
        # Taken while the zygote pins the pid: names this process, even after the zygote
        # is gone and the pid is free again.
        self._pidfd: int | None = None
        with contextlib.suppress(OSError):  # Linux before 5.3: the group's kill only
            self._pidfd = os.pidfd_open(pid)
        self._exit: LeaderExit | None = None
        self._done = threading.Event()

    @property
    def pid(self) -> int:
        return self._pid

    def wait_exit(self) -> LeaderExit:
        self._done.wait()
        assert self._exit is not None
        return self._exit

    def reap(self) -> None:
        self._zygote.reap(self._pid)
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)

    def exited(self, result: LeaderExit) -> None:
        if not self._done.is_set():
            self._exit = result
            self._done.set()

    def orphaned(self, why: str) -> None:
        """The zygote is gone: kill this worker's group and note its end ourselves."""
        if self._done.is_set():
            return
        fd = self._pidfd
        with contextlib.suppress(OSError):
            if fd is None or not select.select([fd], [], [], 0)[0]:
                os.killpg(self._pid, signal.SIGKILL)  # alive: its pid is still its own
            if fd is not None:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
                select.select([fd], [], [], ORPHAN_WAIT_S)
        note = f"{why}; the harness killed it (its exit status is not known)"
        self.exited(LeaderExit(-signal.SIGKILL, time.monotonic(), note))


class Zygote:
    """The run's zygote for one interpreter and module list: started on the first
    :meth:`spawn`, stopped by :meth:`close`; thread-safe."""

    def __init__(
        self,
        interpreter: str | None,
        modules: Sequence[str],
        *,
        cwd: Path,
        log: Path,
        watchdog: Watchdog | None,
        wanted_as: str = "python3",
    ) -> None:
        self.interpreter = interpreter
        self.modules = list(modules)
        self.cwd = cwd
        #: Its stderr (what the preloaded modules print, and why it failed).
        self.log = log
        self._watchdog = watchdog
        #: The environment it starts with, which a forked worker's must match.
        self.env = dict(os.environ)
        self._proc: subprocess.Popen[bytes] | None = None
        #: Why no fork can be had any more; None while it can.
        self.broken: str | None = (
            None if interpreter is not None else f"{wanted_as!r} is not on PATH"
        )
        self._start_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._cond = threading.Condition()
        self._replies: dict[int, dict[str, Any]] = {}
        self._children: dict[int, ZygoteChild] = {}
        self._next_id = 0
        self._closing = False
        self._reader: threading.Thread | None = None
        #: Seconds from its start to ready (None until then), for the run's timings.
        self.ready_s: float | None = None

    def cold_reason(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> str | None:
        """Why this start cannot be a fork (see :func:`cold_reason`), or None."""
        if self.broken is not None or self.interpreter is None:
            return self.broken
        return cold_reason(argv, env, cwd=cwd, interpreter=self.interpreter, zygote_env=self.env)

    def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        logs: tuple[Path, Path],
        procs: Path | None,
    ) -> ZygoteChild:
        """Fork ``argv`` (which :meth:`cold_reason` passed); :class:`ZygoteUnavailable`
        when the zygote cannot, :class:`OSError` when the start itself is refused."""
        module = argv[1] == "-m"
        request: dict[str, Any] = {
            "op": "start",
            "form": "module" if module else "script",
            "target": argv[2] if module else argv[1],
            "args": list(argv[3:] if module else argv[2:]),
            "env": dict(env),
            "cwd": str(cwd),
            "stdout": str(logs[0]),
            "stderr": str(logs[1]),
            "procs": None if procs is None else str(procs),
        }
        with self._start_lock:
            self._ensure_started()
            self._next_id += 1
            request["id"] = ident = self._next_id
            self._write(request)
            reply = self._reply(ident)
        if "error" in reply:
            raise FileNotFoundError(reply["error"])
        return self._children[int(reply["pid"])]

    def reap(self, pid: int) -> None:
        with contextlib.suppress(ZygoteUnavailable):
            self._write({"op": "reap", "pid": pid})

    def close(self) -> None:
        """Stdin closed (it kills and reaps what it still holds), then SIGTERM, SIGKILL."""
        with self._start_lock:
            self._closing = True
            proc, self._proc = self._proc, None
            self.broken = self.broken or "the run ended"
        if proc is None:
            return
        end_group(proc, CLOSE_GRACE_S)
        if self._reader is not None:
            self._reader.join()  # it closes the zygote's stdout once it has read it all
        if self._watchdog is not None:
            self._watchdog.forget_group(proc.pid)

    # -- the wire --------------------------------------------------------------------

    def _ensure_started(self) -> None:
        if self.broken is not None:
            raise ZygoteUnavailable(self.broken)
        if self._proc is not None:
            return
        assert self.interpreter is not None
        self.log.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with self.log.open("ab") as err:
            try:
                proc = subprocess.Popen(
                    [self.interpreter, str(SERVER), *self.modules],
                    cwd=self.cwd,
                    env=self.env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    start_new_session=True,  # Ctrl-C and a kill of our group spare it
                )
            except OSError as exc:
                self.broken = f"the zygote could not start: {exc}"
                raise ZygoteUnavailable(self.broken) from None
        if self._watchdog is not None:
            self._watchdog.watch_group(proc.pid)
        self._proc = proc
        first = self._first_line(proc)
        if first.get("ready") is not True:
            self._proc = None
            self._stop(proc)
            why = first.get("error") or f"it answered {json.dumps(first)[:200]}"
            self.broken = f"the zygote of {' '.join(self.modules)} failed: {why}"
            raise ZygoteUnavailable(self.broken)
        self.ready_s = time.monotonic() - started
        self._reader = threading.Thread(
            target=self._read_forever, args=(proc,), name="crashpoint-zygote", daemon=True
        )
        self._reader.start()

    def _first_line(self, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
        line = proc.stdout.readline() if ready else b""
        try:
            doc = json.loads(line)
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            return doc
        if not ready:
            return {"error": f"not ready within {READY_TIMEOUT_S:.0f} s"}
        return {"error": f"it exited{self._said()}"}

    def _stop(self, proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for pipe in (proc.stdin, proc.stdout) if self._reader is None else (proc.stdin,):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        if self._watchdog is not None:
            self._watchdog.forget_group(proc.pid)

    def _write(self, doc: Mapping[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise ZygoteUnavailable(self.broken or "the zygote is not running")
        with self._write_lock:
            try:
                proc.stdin.write(json.dumps(doc).encode() + b"\n")
                proc.stdin.flush()
            except (OSError, ValueError):
                raise ZygoteUnavailable(self.broken or "the zygote went away") from None

    def _reply(self, ident: int) -> dict[str, Any]:
        deadline = time.monotonic() + START_TIMEOUT_S
        with self._cond:
            while ident not in self._replies:
                left = deadline - time.monotonic()
                if self.broken is not None and self._proc is None:
                    raise ZygoteUnavailable(self.broken)
                if left <= 0:
                    break
                self._cond.wait(left)
            else:
                return self._replies.pop(ident)
        # No answer: a zygote that stopped answering cannot be trusted with another start.
        proc, self._proc = self._proc, None
        self.broken = f"the zygote gave no answer within {START_TIMEOUT_S:.0f} s"
        if proc is not None:
            self._stop(proc)
        raise ZygoteUnavailable(self.broken)

    def _read_forever(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            doc = json.loads(line)
            if "exit" in doc:
                child = self._children.pop(int(doc["exit"]), None)
                if child is not None:
                    child.exited(LeaderExit(int(doc["code"]), float(doc["t"])))
                continue
            if "pid" in doc:
                pid = int(doc["pid"])
                self._children[pid] = ZygoteChild(self, pid)
            with self._cond:
                self._replies[int(doc["id"])] = doc
                self._cond.notify_all()
        self._gone(proc)

    def _gone(self, proc: subprocess.Popen[bytes]) -> None:
        """EOF from the zygote: closed by :meth:`close`, or it died."""
        code = proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
        with self._write_lock, contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        with self._cond:
            if self._proc is proc:
                self._proc = None
            if not self._closing:
                self.broken = f"the zygote died ({describe_exit(code)}){self._said()}"
            self._cond.notify_all()
        why = "the run ended" if self._closing else self.broken or "the zygote died"
        for child in list(self._children.values()):
            child.orphaned(why)
        self._children.clear()
        if self._watchdog is not None and not self._closing:
            self._watchdog.forget_group(proc.pid)

    def _said(self) -> str:
        try:
            return stderr_tail(self.log.read_bytes())
        except OSError:
            return ""
