"""A detached reaper that outlives the harness (the Ryuk pattern).

:meth:`Watchdog.start` spawns ``python -m harness.watchdog`` in its own session with the
read end of a pipe as its stdin. The harness writes one JSON line per thing it starts
(a process group, a cgroup, the run's containers, a temp dir) and per thing it reaped. When the pipe
reaches EOF, whether because the harness closed it, exited, was interrupted or was
SIGKILLed (the kernel closes its fds), the watchdog kills and removes whatever is still
registered, then exits. The pipe gives an instant, pid-reuse-free death signal; a slow
poll of the parent pid covers a write end kept open by a ``fork()``ed child.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psutil

#: Docker label on every container a run starts; the watchdog sweeps by it.
RUN_LABEL = "crashpoint.run"
#: How long one Engine API call may take. Not a wait of the trial's: with the vfs storage
#: driver a create copies the container's root, and on a 2-core machine under load that
#: was seen past 10 s, which failed the trial and left the container the engine went on
#: to create after the client had given up.
DOCKER_API_TIMEOUT_S = 60.0

_PARENT_POLL_S = 0.5


class Watchdog:
    """Harness side: registers what must not outlive this process."""

    def __init__(self, proc: subprocess.Popen[bytes], write_fd: int, run_id: str) -> None:
        self.run_id = run_id
        self._proc = proc
        self._fd: int | None = write_fd
        self._lock = threading.Lock()

    @classmethod
    def start(cls, run_id: str | None = None) -> Watchdog:
        run_id = run_id or uuid.uuid4().hex[:12]
        read_fd, write_fd = os.pipe()  # non-inheritable: workers never hold the write end
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "harness.watchdog", str(os.getpid()), run_id],
                stdin=read_fd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C and a kill of our group must not reach it
            )
        finally:
            os.close(read_fd)
        return cls(proc, write_fd, run_id)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def watch_group(self, pgid: int) -> None:
        self._send({"op": "group", "pgid": pgid, "ctime": _create_time(pgid)})

    def forget_group(self, pgid: int) -> None:
        self._send({"op": "forget_group", "pgid": pgid})

    def watch_cgroup(self, path: str | Path) -> None:
        """Kill every process in the cgroup ``path`` (and its children) and remove them
        if the harness dies: a backend's cgroup of worker slots."""
        self._send({"op": "cgroup", "path": str(path)})

    def forget_cgroup(self, path: str | Path) -> None:
        self._send({"op": "forget_cgroup", "path": str(path)})

    def watch_containers(self) -> None:
        """Remove every container (and volume) labelled ``crashpoint.run=<run_id>`` if the
        harness dies. Each backend that starts containers says so once."""
        self._send({"op": "containers"})

    def forget_containers(self) -> None:
        """A backend removed its containers itself; the run's other backends still count."""
        self._send({"op": "forget_containers"})

    def creating(self, name: str) -> None:
        """A create of the container ``name`` is about to be asked of the engine; until
        :meth:`created`, the watchdog also waits for it to land (a create the harness
        died during, or gave up on, may land after any sweep by label)."""
        self._send({"op": "creating", "name": name})

    def created(self, name: str) -> None:
        """The create of ``name`` is settled: it exists under the run's label, or it was
        removed."""
        self._send({"op": "created", "name": name})

    def watch_dir(self, path: str | Path) -> None:
        self._send({"op": "dir", "path": str(path)})

    def forget_dir(self, path: str | Path) -> None:
        self._send({"op": "forget_dir", "path": str(path)})

    def close(self, timeout_s: float = 10.0) -> None:
        """Normal exit: the watchdog sweeps anything still registered, then exits; reap it."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> Watchdog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, message: dict[str, Any]) -> None:
        line = (json.dumps(message) + "\n").encode()
        with self._lock:
            if self._fd is None:
                return
            try:
                os.write(self._fd, line)  # one short line: atomic under PIPE_BUF
            except BrokenPipeError:
                # The watchdog died; the run goes on, only the crash safety net is gone.
                os.close(self._fd)
                self._fd = None


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


class _Registry:
    """Watchdog side: what is still registered."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.groups: dict[int, float | None] = {}
        self.dirs: set[str] = set()
        self.cgroups: set[str] = set()
        #: Backends with containers: concurrent trials share the run's label, and one
        #: trial's clean close must not end the watch over another's containers.
        self.containers = 0
        #: Containers asked for and not yet known to exist or to be gone.
        self.creating: set[str] = set()

    def apply(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "group":
            self.groups[int(message["pgid"])] = message.get("ctime")
        elif op == "forget_group":
            self.groups.pop(int(message["pgid"]), None)
        elif op == "cgroup":
            self.cgroups.add(str(message["path"]))
        elif op == "forget_cgroup":
            self.cgroups.discard(str(message["path"]))
        elif op == "containers":
            self.containers += 1
        elif op == "forget_containers":
            self.containers = max(0, self.containers - 1)
        elif op == "creating":
            self.creating.add(str(message["name"]))
        elif op == "created":
            self.creating.discard(str(message["name"]))
        elif op == "dir":
            self.dirs.add(str(message["path"]))
        elif op == "forget_dir":
            self.dirs.discard(str(message["path"]))

    def sweep(self) -> None:
        for pgid, ctime in self.groups.items():
            _kill_group(pgid, ctime)
        for path in self.cgroups:
            _kill_cgroup(Path(path))
        if self.containers or self.creating:
            _remove_containers(self.run_id, self.creating)
        for path in self.dirs:
            shutil.rmtree(path, ignore_errors=True)


def _kill_group(pgid: int, ctime: float | None) -> None:
    if pgid <= 1:
        return  # killpg(0) is our own group and killpg(1) init's: never ours to kill
    # A live process with this pid but another start time is a stranger who got the pid
    # after our group ended: leave it alone.
    leader_ctime = _create_time(pgid)
    if leader_ctime is not None and ctime is not None and abs(leader_ctime - ctime) > 0.01:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _kill_cgroup(path: Path, wait_s: float = 2.0) -> None:
    """SIGKILL the whole subtree in one write, then remove its directories, deepest
    first (a cgroup is removable once its members are gone, zombies aside)."""
    if not (path / "cgroup.kill").exists():
        return
    with contextlib.suppress(OSError):
        (path / "cgroup.kill").write_text("1")
    dirs = sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
    deadline = time.monotonic() + wait_s
    for d in [*dirs, path]:
        while True:
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.01)


def _remove_containers(
    run_id: str,
    creating: Iterable[str] = (),
    *,
    connect: Callable[[], Any] | None = None,
    land_within_s: float = DOCKER_API_TIMEOUT_S,
) -> None:
    """Remove the run's containers and volumes; then wait, up to ``land_within_s``, for
    each create still ``creating`` to land, and remove it too. The engine finishes a
    create whose client went away (SIGKILL of the harness, or its own timeout), and under
    load with the vfs driver that was seen to come after the sweep, leaving a container
    in state "created" for good."""
    try:
        import docker.errors

        client = connect() if connect is not None else _engine()
        label = {"label": f"{RUN_LABEL}={run_id}"}
        waiting = set(creating)
        deadline = time.monotonic() + land_within_s
        while True:
            # Another reaper (the backend's own close) may remove a container between the
            # listing and the removal: neither step may fail on a container already gone.
            for container in client.containers.list(all=True, filters=label, ignore_removed=True):
                waiting.discard(container.name)
                with contextlib.suppress(docker.errors.NotFound):
                    container.remove(force=True, v=True)  # v: anonymous volumes go too
            if not waiting or time.monotonic() >= deadline:
                break
            time.sleep(_PARENT_POLL_S)
        for volume in client.volumes.list(filters=label):
            with contextlib.suppress(docker.errors.NotFound):
                volume.remove(force=True)
        client.close()
    except Exception as exc:  # the engine may be gone too; nothing else to do from here
        print(f"watchdog: could not remove containers of run {run_id}: {exc}", file=sys.stderr)


def _engine() -> Any:
    import docker

    return docker.from_env(timeout=int(DOCKER_API_TIMEOUT_S))


def _parent_alive(parent: psutil.Process) -> bool:
    try:
        return parent.is_running() and parent.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def main(argv: list[str]) -> int:
    parent_pid, run_id = int(argv[0]), argv[1]
    try:
        parent = psutil.Process(parent_pid)
    except psutil.Error:
        parent = None
    registry = _Registry(run_id)
    stdin = sys.stdin.buffer
    # Ignore the usual terminal signals: only EOF or a dead parent ends the watch.
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    import select

    buf = b""
    while True:
        ready, _, _ = select.select([stdin], [], [], _PARENT_POLL_S)
        if ready:
            chunk = os.read(stdin.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.strip():
                    registry.apply(json.loads(line))
        elif parent is None or not _parent_alive(parent):
            break
    registry.sweep()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
