"""Harness side of the failpoint protocol (see :mod:`harness.contract.failpoint`).

A worker connects to a UNIX socket, writes one JSON line per boundary it reaches
(``{"point", "job", "attempt", "pid"}``) and blocks until it reads one line back
(``{"action": "continue"}``). :meth:`Rendezvous.hold` arms a hold; a hit that matches
is kept waiting (the worker is blocked exactly at its boundary) until the trial calls
:meth:`Hit.resume`, or kills the worker. Hits nobody held are answered at once.

One background thread serves every connection through a selector. Replies are written
from the caller's thread; a worker never sends a line before it got its reply, so reads
and writes on one connection never overlap.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.contract.errors import ConfigError, RendezvousTimeout
from harness.failpoint_lines import (
    MAX_BAD_LINES,
    BadLine,
    FailpointLine,
    LineBuffer,
    LineTooLong,
    parse_line,
    shown,
)
from harness.history import History

# sockaddr_un.sun_path is 108 bytes on Linux, including the terminating NUL.
_MAX_SOCKET_PATH = 107
_CONTINUE = b'{"action": "continue"}\n'
#: A worker reads its reply at once (it is blocked waiting for it), so a send only waits
#: when the peer stopped reading with its socket buffer full: a client that writes lines
#: without reading replies. Past this bound it is dropped rather than stall the one
#: thread that serves every other worker.
_REPLY_TIMEOUT_S = 1.0


class _Conn:
    """One worker connection; owns the socket and the line buffer."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.peer_pid = _peer_pid(sock)
        self.lines = LineBuffer()
        self.bad_lines = 0
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.held: list[Hit] = []

    def reply(self, line: bytes) -> bool:
        with self.lock:
            return self.send_locked(line)

    def send_locked(self, line: bytes) -> bool:
        """Send ``line`` unless closed; the caller holds :attr:`lock`."""
        if self.closed.is_set():
            return False
        try:
            self.sock.sendall(line)
        except OSError:
            return False
        return True


def _peer_pid(sock: socket.socket) -> int | None:
    """The connecting process's pid as *we* see it (a container worker reports its own
    namespace's pid in the JSON line; the kernel translates SO_PEERCRED for us)."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid = int(struct.unpack("3i", creds)[0])
    return pid or None


@dataclass
class Hit:
    """One worker reaching one failpoint."""

    point: str
    job: str | None
    attempt: int | None
    pid: int | None
    t: float
    held: bool
    _conn: _Conn = field(repr=False, compare=False)
    #: The worker's pid in the harness's namespace (differs from ``pid`` in a container).
    peer_pid: int | None = None
    #: The lane of the history this hit was recorded in (``worker:<name>``).
    source: str = ""
    _resumed: bool = field(default=False, repr=False, compare=False)
    #: The step of a multi-step job the boundary belongs to (the line's ``step``), or None.
    step: str | None = None

    def resume(self, action: str = "continue") -> bool:
        """Let the worker go on; ``False`` if it had already disconnected (killed)."""
        conn = self._conn
        # Under the lock a disconnect takes to note the hits nobody resumed: either the
        # worker got this answer, or the note says it died held (issue 17).
        with conn.lock:
            if self._resumed:
                return not conn.closed.is_set()
            self._resumed = True
            return conn.send_locked((json.dumps({"action": action}) + "\n").encode())

    @property
    def disconnected(self) -> bool:
        """The worker closed its connection (exited or was killed)."""
        return self._conn.closed.is_set()

    def wait_disconnected(self, timeout_s: float) -> bool:
        """Block until the worker's connection closes; ``True`` if it did in time."""
        return self._conn.closed.wait(timeout_s)


class Gate:
    """An armed hold; :meth:`wait` returns each matching hit in arrival order."""

    def __init__(
        self,
        point: str,
        job: str | None,
        attempt: int | None,
        times: int,
        step: str | None = None,
    ) -> None:
        self.point = point
        self.job = job
        self.attempt = attempt
        self.step = step
        self.remaining = times
        self.hits: list[Hit] = []
        self._queue: deque[Hit] = deque()
        self._cond = threading.Condition()
        #: Disarmed: a hit claimed before and delivered after is not held (nobody waits).
        self._closed = False

    def matches(
        self, point: str, job: str | None, attempt: int | None, step: str | None = None
    ) -> bool:
        return (
            self.remaining > 0
            and point == self.point
            and (self.job is None or job == self.job)
            and (self.attempt is None or attempt == self.attempt)
            and (self.step is None or step == self.step)
        )

    def deliver(self, hit: Hit) -> bool:
        """Queue ``hit`` for :meth:`wait`; ``False`` once closed (the caller lets it go)."""
        with self._cond:
            if self._closed:
                return False
            self.hits.append(hit)
            self._queue.append(hit)
            self._cond.notify_all()
            return True

    def close(self) -> list[Hit]:
        """Take no more hits; the ones held that no :meth:`wait` took, to be let go."""
        with self._cond:
            self._closed = True
            left = list(self._queue)
            self._queue.clear()
            return left

    def wait(self, timeout_s: float) -> Hit:
        """The next held hit; raises :class:`RendezvousTimeout` after ``timeout_s``."""
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._queue), timeout_s):
                raise RendezvousTimeout(
                    f"no worker reached failpoint {self.point!r} "
                    f"(job={self.job!r}, attempt={self.attempt!r}) within {timeout_s} s; "
                    "check that the worker calls failpoint() there and that "
                    "CRASHPOINT_FAILPOINTS is set in its environment"
                )
            return self._queue.popleft()

    def describe(self) -> str:
        where = f"{self.point} job={self.job} attempt={self.attempt}"
        return where if self.step is None else f"{where} step={self.step}"


class Holds:
    """The armed holds, matched in arming order (no I/O: unit-testable)."""

    def __init__(self) -> None:
        self._gates: list[Gate] = []
        self._lock = threading.Lock()

    def arm(
        self,
        point: str,
        job: str | None,
        attempt: int | None,
        times: int,
        step: str | None = None,
    ) -> Gate:
        if times < 1:
            raise ConfigError(f"a hold needs times >= 1, got times={times!r}")
        gate = Gate(point, job, attempt, times, step)
        with self._lock:
            self._gates.append(gate)
        return gate

    def claim(
        self, point: str, job: str | None, attempt: int | None, step: str | None = None
    ) -> Gate | None:
        """The first armed gate matching this hit, with one use consumed."""
        with self._lock:
            for gate in self._gates:
                if gate.matches(point, job, attempt, step):
                    gate.remaining -= 1
                    if gate.remaining == 0:
                        self._gates.remove(gate)
                    return gate
        return None

    def disarm(self, gate: Gate) -> list[Hit]:
        """Remove ``gate``; the hits it held that nobody took, which the caller lets go."""
        with self._lock:
            if gate in self._gates:
                self._gates.remove(gate)
            gate.remaining = 0
        return gate.close()


class Rendezvous:
    """A UNIX socket server for failpoint hits; a context manager."""

    def __init__(
        self,
        path: str | Path,
        history: History | None = None,
        *,
        names: Callable[[int | None, int | None], str | None] | None = None,
    ) -> None:
        """``names`` maps a hit's (pid, peer pid) to its worker's name, for hits whose
        line carries no ``worker`` (see :class:`harness.lanes.WorkerNames`)."""
        self.path = Path(path)
        if len(os.fsencode(self.path)) > _MAX_SOCKET_PATH:
            raise ConfigError(
                f"failpoint socket path is {len(os.fsencode(self.path))} bytes, over the "
                f"{_MAX_SOCKET_PATH}-byte UNIX socket limit: {str(self.path)!r}; "
                "use a shorter state directory (for example under /tmp)"
            )
        self._history = history
        self._names = names
        self._holds = Holds()
        self._hits: list[Hit] = []
        self._hits_lock = threading.Lock()
        self._conns: set[_Conn] = set()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._listener.bind(str(self.path))
        self._listener.listen(64)
        self._listener.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name="crashpoint-rendezvous")
        self._thread.daemon = True
        self._thread.start()

    @property
    def env(self) -> dict[str, str]:
        """The environment entry that points a worker here."""
        return {"CRASHPOINT_FAILPOINTS": str(self.path)}

    def hold(
        self,
        point: str,
        *,
        job: str | None = None,
        attempt: int | None = None,
        times: int = 1,
        step: str | None = None,
    ) -> Gate:
        """Arm a hold: the next ``times`` matching hits wait until resumed (``step``: only
        hits at that step of a multi-step job)."""
        return self._holds.arm(point, job, attempt, times, step)

    def disarm(self, gate: Gate) -> None:
        """Stop holding for ``gate``. Hits taken with :meth:`Gate.wait` stay held until
        resumed; one it held that nobody took (it came as the waiter gave up) goes on, or
        its worker would wait forever for an answer nobody will send."""
        for hit in self._holds.disarm(gate):
            hit.resume()

    def hits(self) -> list[Hit]:
        """Every hit so far, held or not, in arrival order."""
        with self._hits_lock:
            return list(self._hits)

    def close(self) -> None:
        """Stop serving, drop every connection (held workers continue) and remove the socket."""
        if self._stopping:
            return
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._thread.join(5.0)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def __enter__(self) -> Rendezvous:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self) -> None:
        try:
            while not self._stopping:
                for key, _ in self._selector.select():
                    if key.fileobj is self._wake_r:
                        continue
                    if key.fileobj is self._listener:
                        self._accept()
                    else:
                        assert isinstance(key.data, _Conn)
                        self._read(key.data)
        finally:
            for conn in list(self._conns):
                self._drop(conn)
            self._selector.close()
            self._listener.close()
            self._wake_r.close()
            self._wake_w.close()

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except BlockingIOError:
            return
        # Only read when readable; a reply may wait for the peer's buffer, but boundedly.
        sock.settimeout(_REPLY_TIMEOUT_S)
        conn = _Conn(sock)
        self._conns.add(conn)
        self._selector.register(sock, selectors.EVENT_READ, conn)

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            if conn.lines.pending.strip():
                self._note(conn, f"disconnected mid-line: {shown(conn.lines.pending)}")
            self._drop(conn)
            return
        try:
            lines = conn.lines.feed(data)
        except LineTooLong as exc:
            self._note(conn, f"{exc}; connection dropped")
            self._drop(conn)
            return
        for line in lines:
            if conn.closed.is_set():
                return
            self._on_line(conn, line)

    def _note(self, conn: _Conn, text: str) -> None:
        """A note on the failpoint connection of ``conn``'s worker, in the supervisor lane."""
        if self._history is not None:
            who = f"pid {conn.peer_pid}" if conn.peer_pid else "a worker"
            self._history.append("supervisor", "note", text=f"failpoint line from {who}: {text}")

    def _on_line(self, conn: _Conn, line: bytes) -> None:
        t = time.monotonic()
        try:
            msg = parse_line(line)
        except BadLine as exc:
            # A malformed line must not wedge the worker: let it go on, and say so; a
            # connection that keeps sending them is not a failpoint client.
            conn.bad_lines += 1
            if conn.bad_lines >= MAX_BAD_LINES:
                self._note(conn, f"{exc}; {conn.bad_lines} bad lines, connection dropped")
                self._drop(conn)
                return
            self._note(conn, f"{exc}; answered continue")
            self._answer(conn)
            return
        self._on_hit(conn, msg, t)

    def _answer(self, conn: _Conn) -> None:
        """Reply continue from the serving thread; a peer that does not read is dropped."""
        if not conn.reply(_CONTINUE) and not conn.closed.is_set():
            self._note(conn, f"not reading its replies within {_REPLY_TIMEOUT_S} s; dropped")
            self._drop(conn)

    def _on_hit(self, conn: _Conn, msg: FailpointLine, t: float) -> None:
        point, job, attempt, pid = msg.point, msg.job, msg.attempt, msg.pid
        # Optional: the worker's CRASHPOINT_WORKER_ID names its lane even inside a
        # container, whose pids mean nothing on the host.
        worker = msg.worker
        if worker is None and self._names is not None:
            worker = self._names(pid, conn.peer_pid)
        step = msg.step
        gate = self._holds.claim(point, job, attempt, step)
        hit = Hit(
            point,
            job,
            attempt,
            pid,
            t,
            gate is not None,
            conn,
            peer_pid=conn.peer_pid,
            source=f"worker:{worker or pid}",
            step=step,
        )
        with self._hits_lock:
            self._hits.append(hit)
        if self._history is not None:
            self._history.append(
                hit.source,
                "failpoint",
                job=job,
                attempt=attempt,
                t=t,
                point=point,
                held=hit.held,
                peer_pid=conn.peer_pid,
                **({} if step is None else {"step": step}),
            )
        if gate is None:
            hit._resumed = True
            self._answer(conn)
        else:
            conn.held.append(hit)
            if not gate.deliver(hit):  # disarmed between the claim and now
                hit.resume()

    def _drop(self, conn: _Conn) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn.sock)
        with conn.lock:
            # The notes go in before the connection is marked closed, under the lock
            # resume() takes: a resume cannot slip in between and hide one (issue 17).
            for hit in conn.held:
                if not hit._resumed and self._history is not None:
                    self._history.append(
                        hit.source,
                        "note",
                        job=hit.job,
                        attempt=hit.attempt,
                        text=f"worker disconnected while held at {hit.point}",
                    )
            conn.closed.set()
            conn.sock.close()
        self._conns.discard(conn)
