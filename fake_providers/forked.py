"""The pool's end of the fork server (``fake_providers.forkserver``): providers forked
warm instead of launched cold, behind the part of ``subprocess.Popen`` the launcher uses.

A forked provider is the fork server's child, not ours: its exit is seen through a
pidfd (readable once it has exited, and never confused with a later process that
reuses its number), and its exit status is asked of the fork server, which reaped it.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, NoReturn, Protocol

from harness.contract.errors import ProviderError

#: The exit status of a forked provider whose fork server is gone (it reaped the child
#: and took the status with it); ``describe_exit`` shows it as "exit 255".
EXIT_UNKNOWN = 255
#: How long the fork server may take to import what a provider needs and say so: a
#: provider's own start is bounded at 5 s, and this is the same work done once.
READY_TIMEOUT_S = 30.0
#: How long one request may wait for its answer: a fork and a pidfd, milliseconds
#: even on a busy machine, so this only bounds a fork server that stopped answering.
ANSWER_TIMEOUT_S = 10.0


class Guard(Protocol):
    def watch_group(self, pgid: int) -> None: ...

    def forget_group(self, pgid: int) -> None: ...


class ForkServerError(ProviderError):
    """The fork server cannot fork (not started, gone, or not answering): start the
    provider the ordinary way instead."""


class ForkedChild:
    """One forked provider: ``pid``, its pipes, ``poll`` and ``wait`` as on ``Popen``."""

    def __init__(
        self, server: ForkServer, pid: int, pidfd: int, stdin: IO[bytes], stdout: IO[bytes]
    ) -> None:
        self.pid = pid
        self.stdin: IO[bytes] | None = stdin
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None
        self._server = server
        self._pidfd = pidfd
        # Open as long as this handle lives: a thread may still wait on it in select()
        # when another has seen the exit, and a closed number can name a new file.
        weakref.finalize(self, os.close, pidfd)
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        return self._settle(0.0)

    def kill(self) -> None:
        """SIGKILL this child through its pidfd: never another process that took its pid."""
        if self.returncode is None:
            signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        code = self._settle(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"forked provider {self.pid}", timeout or 0.0)
        return code

    def _settle(self, timeout: float | None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        if not select.select([self._pidfd], [], [], timeout)[0]:
            return None
        with self._lock:
            if self.returncode is None:
                self.returncode = self._server.exit_code(self.pid)
            return self.returncode


class ForkServer:
    """One fork server process and the socket to it; thread safe. Started on the
    first :meth:`spawn`; :meth:`close` ends it (its children stop by themselves)."""

    def __init__(self, log_path: Path, *, guard: Guard | None = None) -> None:
        self.log_path = log_path
        self._guard = guard
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._broken: str | None = None
        #: Providers forked so far.
        self.forked = 0

    def spawn(self, settings: Mapping[str, Any], log_path: Path) -> ForkedChild:
        """Fork a provider started with ``settings`` (the launcher's), stderr to
        ``log_path``; ForkServerError if the fork server cannot."""
        child_in, our_in = os.pipe()
        our_out, child_out = os.pipe()
        request = {"op": "spawn", "settings": dict(settings), "log": str(log_path)}
        try:
            with self._lock:
                sock = self._connected()
                reply, fds = self._ask(sock, request, [child_in, child_out])
        except BaseException:
            for fd in (our_in, our_out):
                os.close(fd)
            raise
        finally:
            os.close(child_in)
            os.close(child_out)
        if "pid" not in reply or len(fds) != 1:
            for fd in (our_in, our_out, *fds):
                os.close(fd)
            raise ForkServerError(f"the fork server did not fork: {reply.get('error', reply)}")
        self.forked += 1
        return ForkedChild(
            self, int(reply["pid"]), fds[0], os.fdopen(our_in, "wb"), os.fdopen(our_out, "rb")
        )

    def exit_code(self, pid: int) -> int:
        """The exit status of forked ``pid``, once it has exited."""
        try:
            with self._lock:
                if self._sock is None:
                    return EXIT_UNKNOWN
                reply, _ = self._ask(self._sock, {"op": "status", "pid": pid}, [])
        except ForkServerError:
            return EXIT_UNKNOWN
        code = reply.get("code")
        return int(code) if isinstance(code, int) else EXIT_UNKNOWN

    def close(self) -> None:
        """End the fork server: it exits at the socket's EOF (SIGKILL if it lingers)."""
        with self._lock:
            sock, proc = self._sock, self._proc
            self._sock = self._proc = None
            self._broken = self._broken or "closed"
        if sock is not None:
            sock.close()
        if proc is not None:
            try:
                proc.wait(5.0)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            if self._guard is not None:
                self._guard.forget_group(proc.pid)

    # -- under the lock ---------------------------------------------------------------

    def _connected(self) -> socket.socket:
        if self._broken is not None:
            raise ForkServerError(f"the fork server is not available ({self._broken})")
        if self._sock is not None:
            return self._sock
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with open(self.log_path, "ab") as log:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "fake_providers.forkserver", str(theirs.fileno())],
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    start_new_session=True,
                )
        except OSError as exc:
            ours.close()
            self._broken = f"could not start: {exc}"
            raise ForkServerError(f"the fork server could not start: {exc}") from None
        finally:
            theirs.close()
        if self._guard is not None:
            self._guard.watch_group(self._proc.pid)
        self._sock = ours
        ready, _ = self._receive(ours, READY_TIMEOUT_S)
        if not ready.get("ready"):
            self._fail(f"it said {ready!r} instead of ready")
        return ours

    def _ask(
        self, sock: socket.socket, request: Mapping[str, Any], fds: list[int]
    ) -> tuple[dict[str, Any], list[int]]:
        try:
            socket.send_fds(sock, [json.dumps(request).encode()], fds)
        except OSError as exc:
            self._fail(f"a request could not be sent: {exc}")
        return self._receive(sock, ANSWER_TIMEOUT_S)

    def _receive(self, sock: socket.socket, timeout_s: float) -> tuple[dict[str, Any], list[int]]:
        sock.settimeout(timeout_s)
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 64 * 1024, 1)
        except OSError as exc:  # socket.timeout is one
            self._fail(f"no answer within {timeout_s:g} s ({type(exc).__name__})")
        if not msg:
            self._fail(f"it exited ({self._exit()}); see {self.log_path}")
        try:
            reply = json.loads(msg)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            for fd in fds:
                os.close(fd)
            self._fail(f"it answered {msg[:200]!r}")
        return reply, fds

    def _fail(self, why: str) -> NoReturn:
        self._broken = why
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        raise ForkServerError(f"the fork server failed: {why}")

    def _exit(self) -> str:
        proc = self._proc
        if proc is None:
            return "not started"
        try:
            return f"status {proc.wait(1.0)}"
        except subprocess.TimeoutExpired:
            return "still running"
