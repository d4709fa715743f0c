"""A Toxiproxy server process, or the running server ``TOXIPROXY_URL`` names."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO

from harness.backends.base import describe_exit
from harness.contract.errors import InfrastructureError, ToxiproxyUnavailable
from harness.network.api import ControlApi, host_port
from harness.network.discovery import INSTALL_HINT, ToxiproxyLocation, find_toxiproxy
from harness.watchdog import Watchdog


class ToxiproxyServer:
    """A Toxiproxy server: started from a binary on a free loopback port, or attached to
    the one ``TOXIPROXY_URL`` names (then :meth:`stop` leaves it running)."""

    def __init__(
        self,
        location: ToxiproxyLocation | None = None,
        *,
        host: str = "127.0.0.1",
        ready_timeout_s: float = 5.0,
        watchdog: Watchdog | None = None,
    ) -> None:
        self.location = location
        self.host = host
        self.port = 0
        self.ready_timeout_s = ready_timeout_s
        self._watchdog = watchdog
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        #: Bumped by every :meth:`restart`: a trial that began on an earlier server lost
        #: its proxies with it, even if another trial has restarted it since.
        self.generation = 0
        self.last_death = ""

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def api(self) -> ControlApi:
        if not self.port:
            raise InfrastructureError("the Toxiproxy server is not started; call start() first")
        return ControlApi(self.host, self.port)

    def start(self) -> ToxiproxyServer:
        if self._proc is not None:
            return self  # already running
        if self.location is None:
            self.location = find_toxiproxy()
        if self.location.url is not None:
            self.host, self.port = host_port(self.location.url, what="TOXIPROXY_URL")
            return self
        assert self.location.binary is not None
        last_error = ""
        for _ in range(3):  # a free port can be taken between our probe and the bind
            self.port = _free_port(self.host)
            last_error = self._spawn(self.location.binary)
            if not last_error:
                return self
        raise ToxiproxyUnavailable(
            f"{self.location.describe()} did not start on {self.host}: {last_error}; "
            f"check the binary runs (`{self.location.binary} -version`) or rebuild it "
            f"with `{INSTALL_HINT}`"
        )

    def _spawn(self, binary: Path) -> str:
        """Start the binary and wait until it answers; '' on success, else why not."""
        # Anonymous, so nothing is left on disk; it lives as long as the server (_discard).
        self._log = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self._proc = subprocess.Popen(
                [str(binary), "-host", self.host, "-port", str(self.port)],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "LOG_LEVEL": os.environ.get("LOG_LEVEL", "warn")},
            )
        except OSError as exc:
            return str(exc)
        if self._watchdog is not None:
            self._watchdog.watch_group(self._proc.pid)
        api = ControlApi(self.host, self.port, timeout_s=0.5)
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                why = f"exited {self._proc.returncode}: {self._log_tail()}"
                self._discard()
                return why
            if _port_open(self.host, self.port):
                with contextlib.suppress(InfrastructureError):
                    api.get("/version")
                    return ""
            time.sleep(0.005)
        self._discard()
        return f"no answer within {self.ready_timeout_s} s"

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read()[-400:].decode(errors="replace").strip()

    def alive(self) -> bool:
        """Whether the server still answers: the process we started is running, or the
        server ``TOXIPROXY_URL`` names replies."""
        if self._proc is not None:
            return self._proc.poll() is None
        if not self.port:
            return False
        try:
            ControlApi(self.host, self.port, timeout_s=0.5).get("/version")
        except InfrastructureError:
            return False
        return True

    def exit_status(self) -> str:
        """How the server we started ended, for a reason line (``killed by SIGKILL``)."""
        code = None if self._proc is None else self._proc.poll()
        return "stopped answering" if code is None else describe_exit(code)

    def restart(self) -> ToxiproxyServer:
        """Start a fresh server after this one died (a new port; trials make their own
        proxies, so nothing of the old server is needed). A ``TOXIPROXY_URL`` server is
        not ours to start: :class:`ToxiproxyUnavailable`."""
        if self.location is not None and self.location.url is not None:
            raise ToxiproxyUnavailable(
                f"the Toxiproxy server at {self.location.url} (TOXIPROXY_URL) stopped "
                "answering; start it again, or unset TOXIPROXY_URL to let crashpoint run one"
            )
        self.last_death = self.exit_status()
        self.generation += 1
        self._discard()
        return self.start()

    def version(self) -> str:
        """The server's version, e.g. ``2.12.0`` (older servers answer plain text)."""
        answer = self.api.get("/version")
        if isinstance(answer, dict):
            return str(answer.get("version", answer))
        return str(answer).strip()

    def reset(self) -> None:
        """Enable every proxy and remove every toxic (between trials)."""
        self.api.post("/reset")

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGTERM the server (it exits cleanly), SIGKILL if it lingers, and reap it."""
        if self._proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._discard()

    def _discard(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            if self._watchdog is not None:
                self._watchdog.forget_group(self._proc.pid)
            self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> ToxiproxyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex((host, port)) == 0
