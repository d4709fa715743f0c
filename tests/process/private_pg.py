"""A private PostgreSQL server for one test: ``initdb`` in a temp dir, ``pg_ctl`` on a free
loopback port, stopped and removed afterwards whatever the test did.

A test that restarts or stops its server must not touch the machine's shared one, which
other test runs use at the same time.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

USER = "postgres"  # initdb refuses to run as root; the Debian package's account


def pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivatePostgres:
    def __init__(self, bindir: Path, root: Path) -> None:
        self.bindir = bindir
        self.data = root / "data"
        self.log = root / "server.log"
        self.port = _free_port()
        self.dsn = f"postgresql://crashpoint@127.0.0.1:{self.port}/crashpoint"

    def _as_owner(self, *argv: str) -> subprocess.CompletedProcess[str]:
        cmd = list(argv)
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", USER, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True)

    def pg_ctl(self, *args: str) -> None:
        self._as_owner(
            str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", *args
        )

    def init(self) -> None:
        self._as_owner(
            str(self.bindir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "crashpoint"
        )
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.data}"
        (self.data / "postgresql.auto.conf").write_text("fsync = off\n")
        self.options = options
        self.start()
        self._as_owner(
            str(self.bindir / "createdb"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "crashpoint",
            "crashpoint",
        )

    def start(self) -> None:
        self.pg_ctl("-o", self.options, "start")

    def restart(self) -> None:
        self.pg_ctl("-o", self.options, "-m", "fast", "restart")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError):
            self.pg_ctl("-m", "immediate", "stop")


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    bindir = pg_bin()
    if bindir is None:
        raise FileNotFoundError("no /usr/lib/postgresql/*/bin/pg_ctl")
    root = Path(tempfile.mkdtemp(prefix="cp-pg-"))
    try:
        if os.geteuid() == 0:
            shutil.chown(root, USER)
        server = PrivatePostgres(bindir, root)
        try:
            server.init()
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
