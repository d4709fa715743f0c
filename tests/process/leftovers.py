"""Count what a harness run left behind: processes and process groups carrying the run's
marker, containers carrying it, ports its processes listened on, temp dirs.

A run is started with :meth:`Marked.env`: a marker variable every descendant inherits
(workers, providers, the Toxiproxy server, the watchdog) and a private TMPDIR. While it
runs, :meth:`Marked.sample` notes the ports its processes listen on; afterwards
:meth:`Marked.wait_clean` polls until nothing is left, or returns what still is.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil

MARK = "CP_LEFTOVER_MARK"


@dataclass
class Leftovers:
    processes: list[str] = field(default_factory=list)
    groups: set[int] = field(default_factory=set)
    ports: set[int] = field(default_factory=set)
    containers: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.processes or self.groups or self.ports or self.containers or self.dirs)


class Marked:
    """One run's marker and TMPDIR, and the counts of what carries them."""

    def __init__(self, base: Path) -> None:
        self.mark = uuid.uuid4().hex
        self.tmp = base / "tmp"
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.seen_ports: set[int] = set()
        self.seen_pids: set[int] = set()

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, MARK: self.mark, "TMPDIR": str(self.tmp), **extra}

    def processes(self) -> list[psutil.Process]:
        out = []
        for proc in psutil.process_iter(["pid", "status"]):
            if proc.pid == os.getpid():
                continue
            with contextlib.suppress(psutil.Error):
                if proc.info["status"] == psutil.STATUS_ZOMBIE:
                    continue
                if proc.environ().get(MARK) == self.mark:
                    out.append(proc)
        return out

    def listening(self, pids: set[int]) -> set[int]:
        ports = set()
        for conn in psutil.net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN and conn.pid in pids and conn.laddr:
                ports.add(conn.laddr.port)
        return ports

    def sample(self) -> list[psutil.Process]:
        """The run's processes now; their listening ports are remembered."""
        procs = self.processes()
        pids = {p.pid for p in procs}
        self.seen_pids |= pids
        self.seen_ports |= self.listening(pids)
        return procs

    def containers(self) -> list[str]:
        if not engine_socket_answers():
            return []  # no engine here: nothing can have started a container
        try:
            import docker

            client = docker.from_env(timeout=5)
        except Exception:
            return []
        found = []
        try:
            for c in client.containers.list(all=True, ignore_removed=True):
                with contextlib.suppress(Exception):
                    env = c.attrs.get("Config", {}).get("Env") or []
                    if f"{MARK}={self.mark}" in env:
                        found.append(c.short_id)
        finally:
            client.close()
        return found

    def leftovers(self) -> Leftovers:
        procs = self.processes()
        pids = {p.pid for p in procs}
        names = []
        groups = set()
        for p in procs:
            with contextlib.suppress(psutil.Error):
                names.append(f"{p.pid} {' '.join(p.cmdline())}")
                groups.add(os.getpgid(p.pid))
        # A port the run listened on, still open by one of its processes (or by one whose
        # owner cannot be told); another process that took the port since is not ours.
        still = {
            c.laddr.port
            for c in psutil.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
            and c.laddr
            and c.laddr.port in self.seen_ports
            and (c.pid is None or c.pid in self.seen_pids)
        }
        return Leftovers(
            processes=names,
            groups=groups,
            ports=self.listening(pids) | still,
            containers=self.containers(),
            dirs=sorted(p.name for p in self.tmp.iterdir()),
        )

    def wait_clean(self, timeout_s: float = 10.0) -> Leftovers:
        """Nothing left (an empty :class:`Leftovers`), or what is still there at the end."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = self.leftovers()
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.1)

    def kill_all(self) -> None:
        """The test's own safety net: whatever the harness failed to reap, reap here."""
        for proc in self.processes():
            with contextlib.suppress(psutil.Error):
                proc.kill()


def engine_socket_answers() -> bool:
    """Whether a Docker engine listens on the local socket (or DOCKER_HOST is not a local
    socket, which the SDK then asks). Asked first because the SDK leaks its connection to
    a socket file that no engine is behind any more (a stopped ``dockerd``)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        return True
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        try:
            sock.connect(host.removeprefix("unix://"))
        except OSError:
            return False
    return True
