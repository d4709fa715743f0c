"""Holds at failpoints, as the trial sees them: a :class:`Gate` arms one, a :class:`Hit`
is a worker blocked at its boundary until resumed, :class:`Holds` keeps the armed ones;
:class:`Connection` is one worker's socket (:mod:`harness.rendezvous` serves them)."""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.contract.errors import ConfigError, RendezvousTimeout
from harness.rendezvous_wire import LineBuffer


class Connection:
    """One worker connection; owns the socket and the line buffer."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.peer_pid = peer_pid(sock)
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


def peer_pid(sock: socket.socket) -> int | None:
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
    _conn: Connection = field(repr=False, compare=False)
    #: The worker's pid in the harness's namespace (differs from ``pid`` in a container).
    peer_pid: int | None = None
    #: The lane of the history this hit was recorded in (``worker:<name>``).
    source: str = ""
    _resumed: bool = field(default=False, repr=False, compare=False)
    #: The step of a multi-step job the boundary belongs to (the line's ``step``), or None.
    step: str | None = None
    #: The declared provider the boundary's call goes to, as the line named it (its
    #: ``provider``, or a ``step`` of a known provider); None: the line did not say.
    provider: str | None = None
    #: A ``job_end`` line's outcome, or None.
    outcome: str | None = None

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
        provider: str | None = None,
        then: Sequence[str] = (),
    ) -> None:
        self.point = point
        self.job = job
        #: The jobs aimed at next, in order, should ``job`` end without reaching the point
        #: (a worker whose call timed out looks the write up and never passes
        #: ``after_external_call``): one that ends moves the hold on (:meth:`Holds.ended`).
        self.then = tuple(then)
        self.attempt = attempt
        self.step = step
        self.provider = provider
        self.remaining = times
        self.hits: list[Hit] = []
        self._queue: deque[Hit] = deque()
        self._cond = threading.Condition()
        #: Disarmed: a hit claimed before and delivered after is not held (nobody waits).
        self._closed = False

    def matches(
        self,
        point: str,
        job: str | None,
        attempt: int | None,
        step: str | None = None,
        provider: str | None = None,
    ) -> bool:
        """A hit that names another provider is not this gate's: a job that calls
        billing, then mailer, reaches each boundary once per provider, and a mailer
        cell's kill belongs at mailer's. A hit that names none is matched, as before:
        a single-step job's line need not say (the trial then reads where it landed)."""
        return (
            self.remaining > 0
            and point == self.point
            and (self.job is None or job == self.job)
            and (self.attempt is None or attempt == self.attempt)
            and (self.step is None or step == self.step)
            and (self.provider is None or provider is None or provider == self.provider)
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
        where = where if self.step is None else f"{where} step={self.step}"
        return where if self.provider is None else f"{where} provider={self.provider}"


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
        provider: str | None = None,
        then: Sequence[str] = (),
    ) -> Gate:
        if times < 1:
            raise ConfigError(f"a hold needs times >= 1, got times={times!r}")
        gate = Gate(point, job, attempt, times, step, provider, then)
        with self._lock:
            self._gates.append(gate)
        return gate

    def claim(
        self,
        point: str,
        job: str | None,
        attempt: int | None,
        step: str | None = None,
        provider: str | None = None,
    ) -> Gate | None:
        """The first armed gate matching this hit, with one use consumed."""
        with self._lock:
            for gate in self._gates:
                if gate.matches(point, job, attempt, step, provider):
                    gate.remaining -= 1
                    if gate.remaining == 0:
                        self._gates.remove(gate)
                    return gate
        return None

    def ended(self, job: str) -> list[tuple[Gate, str]]:
        """``job`` ended for good: each gate still aimed at it moves on to its next job.
        The gates moved, each with the job it aims at now."""
        moved: list[tuple[Gate, str]] = []
        with self._lock:
            for gate in self._gates:
                if gate.job == job and gate.then:
                    gate.job, gate.then = gate.then[0], gate.then[1:]
                    moved.append((gate, gate.job))
        return moved

    def disarm(self, gate: Gate) -> list[Hit]:
        """Remove ``gate``; the hits it held that nobody took, which the caller lets go."""
        with self._lock:
            if gate in self._gates:
                self._gates.remove(gate)
            gate.remaining = 0
        return gate.close()
