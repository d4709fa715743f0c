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
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.contract.errors import ConfigError
from harness.contract.failpoint import JOB_END, JOB_OUTCOMES
from harness.history import History
from harness.rendezvous_holds import Connection, Gate, Hit, Holds, peer_pid
from harness.rendezvous_wire import (
    MAX_BAD_LINES,
    BadLine,
    FailpointLine,
    LineTooLong,
    parse_line,
    shown,
)

__all__ = ["Connection", "Gate", "Hit", "Holds", "Rendezvous", "peer_pid"]

# sockaddr_un.sun_path is 108 bytes on Linux, including the terminating NUL.
_MAX_SOCKET_PATH = 107
_CONTINUE = b'{"action": "continue"}\n'
#: A worker reads its reply at once (it is blocked waiting for it), so a send only waits
#: when the peer stopped reading with its socket buffer full: a client that writes lines
#: without reading replies. Past this bound it is dropped rather than stall the one
#: thread that serves every other worker.
_REPLY_TIMEOUT_S = 1.0


class Rendezvous:
    """A UNIX socket server for failpoint hits; a context manager."""

    def __init__(
        self,
        path: str | Path,
        history: History | None = None,
        *,
        names: Callable[[int | None, int | None], str | None] | None = None,
        step_providers: Mapping[str, str] | None = None,
    ) -> None:
        """``names`` maps a hit's (pid, peer pid) to its worker's name, for hits whose
        line carries no ``worker`` (see :class:`harness.lanes.WorkerNames`);
        ``step_providers`` maps a line's ``step`` to the provider it calls, for lines
        that name no ``provider`` (a declared step's, or a step named after its
        provider)."""
        self.path = Path(path)
        if len(os.fsencode(self.path)) > _MAX_SOCKET_PATH:
            raise ConfigError(
                f"failpoint socket path is {len(os.fsencode(self.path))} bytes, over the "
                f"{_MAX_SOCKET_PATH}-byte UNIX socket limit: {str(self.path)!r}; "
                "use a shorter state directory (for example under /tmp)"
            )
        self._history = history
        self._names = names
        self._step_providers = dict(step_providers or {})
        self._holds = Holds()
        self._hits: list[Hit] = []
        self._hits_lock = threading.Lock()
        self._conns: set[Connection] = set()
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
        provider: str | None = None,
        then: Sequence[str] = (),
    ) -> Gate:
        """Arm a hold: the next ``times`` matching hits wait until resumed (``step``: only
        hits at that step of a multi-step job; ``provider``: no hit that names another
        provider; ``then``: the jobs aimed at next, in order, should ``job`` end without
        reaching the point, as its ``job_end`` line says)."""
        return self._holds.arm(point, job, attempt, times, step, provider, then)

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

    def job_ends(self) -> list[tuple[str, float]]:
        """``(job, when)`` of every job-end event so far (``job_end`` with a known outcome)."""
        return [
            (h.job, h.t)
            for h in self.hits()
            if h.point == JOB_END and h.job is not None and h.outcome in JOB_OUTCOMES
        ]

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
                        assert isinstance(key.data, Connection)
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
        conn = Connection(sock)
        self._conns.add(conn)
        self._selector.register(sock, selectors.EVENT_READ, conn)

    def _read(self, conn: Connection) -> None:
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

    def _note(self, conn: Connection, text: str) -> None:
        """A note on the failpoint connection of ``conn``'s worker, in the supervisor lane."""
        if self._history is not None:
            who = f"pid {conn.peer_pid}" if conn.peer_pid else "a worker"
            self._history.append("supervisor", "note", text=f"failpoint line from {who}: {text}")

    def _on_line(self, conn: Connection, line: bytes) -> None:
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

    def _answer(self, conn: Connection) -> None:
        """Reply continue from the serving thread; a peer that does not read is dropped."""
        if not conn.reply(_CONTINUE) and not conn.closed.is_set():
            self._note(conn, f"not reading its replies within {_REPLY_TIMEOUT_S} s; dropped")
            self._drop(conn)

    def _on_hit(self, conn: Connection, msg: FailpointLine, t: float) -> None:
        point, job, attempt, pid = msg.point, msg.job, msg.attempt, msg.pid
        # Optional: the worker's CRASHPOINT_WORKER_ID names its lane even inside a
        # container, whose pids mean nothing on the host.
        worker = msg.worker
        if worker is None and self._names is not None:
            worker = self._names(pid, conn.peer_pid)
        step = msg.step
        provider = msg.provider or self._step_providers.get(step or "")
        gate = self._holds.claim(point, job, attempt, step, provider)
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
            provider=provider,
            outcome=msg.outcome,
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
                **({} if provider is None else {"provider": provider}),
                **_source_line(msg),
                **({} if msg.outcome is None else {"outcome": msg.outcome}),
            )
        if point == JOB_END and job is not None and msg.outcome in JOB_OUTCOMES:
            # Before the answer: the worker's next line, about its next job, meets the
            # hold already moved on.
            for moved, now in self._holds.ended(job):
                if self._history is not None:
                    self._history.append(
                        "supervisor",
                        "note",
                        job=job,
                        text=f"{job} ended without reaching {moved.point}: "
                        f"the hold there aims at {now} now",
                    )
        if gate is None:
            hit._resumed = True
            self._answer(conn)
        else:
            conn.held.append(hit)
            if not gate.deliver(hit):  # disarmed between the claim and now
                hit.resume()

    def _drop(self, conn: Connection) -> None:
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


def _source_line(msg: FailpointLine) -> dict[str, object]:
    """The caller's file and line, for the history, when the client sent them."""
    if msg.file is None:
        return {}
    return {"file": msg.file} if msg.line is None else {"file": msg.file, "line": msg.line}
