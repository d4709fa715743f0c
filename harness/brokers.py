"""A target's broker, started by the harness for one trial (``[target.broker]``).

A queue's broker is the target's, not the harness's: jobs wait in it and deliveries
come out of it. So each trial gets a broker of its own, on loopback, and the row
``broker_restart`` stops it (SIGTERM or SIGKILL) and starts it again on the same data
directory and port, as an operator's restart or a crash and a supervisor's restart do.

Redis is started durable (``appendonly yes``, ``appendfsync always``): every write it
acknowledged is on disk before the reply, so whatever a restart loses was never
acknowledged, and what the worker then does is the worker's doing. No RDB snapshots:
the append-only file alone is what a restart reads back.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Protocol, runtime_checkable

from harness.contract.errors import InfrastructureError

#: The one kind the harness starts itself.
KINDS = ("redis",)
#: How long a start may take before the broker counts as failed to start (Redis reads
#: its append-only file back first, which for one trial's jobs takes milliseconds).
START_TIMEOUT_S = 10.0
#: How long a stopped broker gets to exit (SIGTERM: it flushes and exits at once).
STOP_TIMEOUT_S = 5.0
#: Starts tried on fresh ports: a free port may be taken between the look and the bind.
PORT_TRIES = 5
_POLL_S = 0.01


class BrokerError(InfrastructureError):
    """The broker could not be started (its program missing, or it never answered)."""


def redis_program() -> str | None:
    """Where ``redis-server`` is, or None when this machine has none."""
    return shutil.which("redis-server")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class GroupWatch(Protocol):
    """What reaps a process group if the harness dies (:class:`harness.watchdog.Watchdog`)."""

    def watch_group(self, pgid: int) -> None: ...

    def forget_group(self, pgid: int) -> None: ...


@runtime_checkable
class Broker(Protocol):
    """A trial's broker: started with the trial, stopped with a signal and started again
    on the same data and port by ``broker_restart``, closed with the trial."""

    kind: str
    port: int
    watchdog: GroupWatch | None

    @property
    def url(self) -> str: ...

    @property
    def pid(self) -> int | None: ...

    def start(self) -> None: ...

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None: ...

    def start_again(self) -> None: ...

    def close(self) -> None: ...


class RedisBroker:
    """One ``redis-server`` on 127.0.0.1 with its data in ``data_dir``."""

    kind = "redis"

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        #: How many times it was started (1 after :meth:`start`, 2 after a restart).
        self.starts = 0
        #: The run's watchdog, when it has one: each server's group is killed with the
        #: trial's workers if the harness itself is SIGKILLed.
        self.watchdog: GroupWatch | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> None:
        """Start it on a free port and wait until it answers; BrokerError if it cannot."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(PORT_TRIES):
            self.port = free_port()
            if self._launch():
                return
        raise BrokerError(
            f"redis-server did not start on any of {PORT_TRIES} free ports; "
            f"see {self.data_dir / 'redis.log'}"
        )

    def start_again(self) -> None:
        """Start it again after :meth:`stop`, on the same port and data directory."""
        if not self._launch():
            raise BrokerError(
                f"redis-server did not come back on port {self.port}; "
                f"see {self.data_dir / 'redis.log'}"
            )

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        """Send ``sig`` and wait for the exit (SIGKILL after the timeout); idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if self.watchdog is not None:
            self.watchdog.forget_group(proc.pid)
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        self.stop(signal.SIGKILL)

    def _launch(self) -> bool:
        """Start ``redis-server`` on :attr:`port`; True once it answers PING."""
        program = redis_program()
        if program is None:
            raise BrokerError(
                "redis-server is not installed; `bash scripts/install-infra.sh redis` installs it"
            )
        argv = [
            program,
            "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.data_dir), "--logfile", "redis.log",
            "--appendonly", "yes", "--appendfsync", "always", "--save", "",
            "--daemonize", "no", "--protected-mode", "yes",
        ]  # fmt: skip
        # In its data directory, inside the trial's: a broker left running is found there.
        proc = subprocess.Popen(
            argv,
            cwd=self.data_dir,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False  # the port was taken, or the data could not be read
            if ping(self.port):
                self._proc = proc
                if self.watchdog is not None:
                    self.watchdog.watch_group(proc.pid)
                self.starts += 1
                return True
            time.sleep(_POLL_S)
        proc.kill()
        proc.wait()
        return False


def ping(port: int) -> bool:
    """Whether a Redis on ``port`` answers PING with PONG (not LOADING: a server still
    reading its append-only file back has not come back yet)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False
