"""A target's enqueue or status command as one long-lived process per trial (``[target.serve]``).

A command that imports a framework pays that import at every start; one-shot, that is
every job enqueued and every status poll. Served, it starts once per trial and answers
one JSON line per request on its stdin and stdout, in the manner of git's long-running
filter processes:

1. The harness writes a handshake line ``{"protocol": "crashpoint-serve", "version": 1,
   "op": "enqueue"}``; the process answers ``{"protocol": "crashpoint-serve", "version": 1}``
   once it is ready (its imports done).
2. Then one request per line, one reply per line, one request in flight:
   ``{"op": "enqueue", "job": {...}, "payload_file": "..."}`` answered ``{"ok": true}``;
   ``{"op": "status", "job_id": "j-0001"}`` answered with the one-shot status line's
   object (``{"state": "done", "attempts": 1}``). Either may answer ``{"error": "why"}``.
3. At the trial's end the harness closes its stdin (exit then), and after a grace
   SIGTERMs and then SIGKILLs its whole process group: nothing it started outlives the
   trial.

With ``scope = "run"`` one process per op serves every trial of the run (a framework
imported once, not once a trial): its handshake says ``"scope": "run"``, it starts in the
configuration's directory, and each request carries the trial it is for, ``"cwd"`` (the
trial's state directory) and ``"env"`` (the variables the one-shot command would have had
beyond the harness's own): the process answers as if started there with them, and keeps
nothing of a trial between requests (a trial's state directory is copied and restored
under it). Requests from parallel trials take turns. It is stopped when the run ends.

Anything else (no answer within the bound, output that is not one JSON object, a closed
stdout, an ``error``) is a :class:`ConfigError` naming the command, what it did and the
last lines of its stderr (kept in a file in the trial's directory, so a chatty server
never blocks on a full pipe): the trial ends inconclusive with that reason, never hangs.
After any of these but an ``error`` answer (which leaves the stream in step) the process
is stopped, and the next request starts a fresh one.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import selectors
import shlex
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.contract.errors import ConfigError
from harness.group_stop import end_group
from harness.targets.command_output import stderr_tail

PROTOCOL = "crashpoint-serve"
VERSION = 1
#: The most a served command may take to answer its handshake: its imports, once per
#: trial, on a machine that may be loaded (the trial's own bound).
READY_TIMEOUT_S = 20.0
#: A line this long is not a reply.
MAX_LINE_BYTES = 1 << 20
#: After stdin closes, then after SIGTERM: how long the process gets to exit.
CLOSE_GRACE_S = 1.0


class ServeError(ConfigError):
    """The served command broke the protocol, went away or did not answer in time."""


class Served:
    """One served command: started on first use (or :meth:`start`), thread-safe."""

    def __init__(
        self,
        op: str,
        argv: Sequence[str],
        *,
        cwd: Path,
        log: Path,
        where: str,
        scope: str = "trial",
    ) -> None:
        self.op = op
        self.scope = scope
        self.argv = list(argv)
        self.cwd = cwd
        #: Its stderr, kept for the error messages and the trial's directory.
        self.log = log
        #: How errors name it: ``FILE: target.serve.enqueue command `...```.
        self.where = f"{where}: target.serve.{op} command `{shlex.join(self.argv)}`"
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready = False
        self._buf = b""
        self._lock = threading.Lock()
        #: Seconds from its start to its handshake answer (None until it answered).
        self.ready_s: float | None = None
        self._started_at = 0.0

    @property
    def pid(self) -> int | None:
        """The running process's pid; None when none runs."""
        proc = self._proc
        return None if proc is None or proc.poll() is not None else proc.pid

    def start(self, env: Mapping[str, str]) -> None:
        """Start the process without waiting for it: its imports overlap the trial's
        other start-up, and the first request waits for its handshake."""
        with self._lock:
            spawned = self._spawn(env)
            proc, started = self._proc, self._started_at
        if spawned and proc is not None:
            watch = threading.Thread(target=self._watch_ready, args=(proc, started), daemon=True)
            watch.start()

    def _watch_ready(self, proc: subprocess.Popen[bytes], started: float) -> None:
        """Note when the handshake's answer arrives (its start-up, for the trial's
        timings), without reading it: the first request does that."""
        out = proc.stdout
        assert out is not None
        with contextlib.suppress(OSError, ValueError):  # closed meanwhile: stopped
            readable, _, _ = select.select([out.fileno()], [], [], READY_TIMEOUT_S)
            if readable and self._proc is proc and self.ready_s is None:
                self.ready_s = time.monotonic() - started

    def request(
        self, doc: Mapping[str, Any], env: Mapping[str, str], timeout_s: float
    ) -> dict[str, Any]:
        """Send ``doc`` and return the reply's object; :class:`ServeError` otherwise."""
        with self._lock:
            self._spawn(env)
            try:
                if not self._ready:
                    self._handshake()
                self._write(doc)
                reply = self._read(timeout_s, "answer")
            except ServeError:
                self._stop()  # no resynchronising a stream that broke: start afresh
                raise
            if "error" in reply:
                raise ServeError(f"{self.where} answered an error: {reply['error']}{self._said()}")
            return reply

    def close(self) -> None:
        """Stdin closed, then SIGTERM, then SIGKILL to its process group; idempotent."""
        with self._lock:
            self._stop()

    # -- the wire --------------------------------------------------------------------

    def _spawn(self, env: Mapping[str, str]) -> bool:
        """Start the process unless it runs; whether this call started it."""
        if self._proc is not None:
            return False
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as err:
            try:
                self._proc = subprocess.Popen(
                    self.argv,
                    cwd=self.cwd,
                    env=dict(env) or None,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    # Its own group: the stop reaches whatever it started too.
                    start_new_session=True,
                )
            except OSError as exc:
                raise ServeError(
                    f"{self.where} cannot start ({exc.strerror or exc}); check the program's name"
                ) from None
        self._started_at = time.monotonic()
        self._ready = False
        self._buf = b""
        # Said at once, so its answer comes when the server is ready, not when asked.
        hello: dict[str, Any] = {"protocol": PROTOCOL, "version": VERSION, "op": self.op}
        if self.scope != "trial":
            hello["scope"] = self.scope
        with contextlib.suppress(ServeError):  # one that died says so at the first read
            self._write(hello)
        return True

    def _handshake(self) -> None:
        reply = self._read(READY_TIMEOUT_S, "handshake")
        if reply.get("protocol") != PROTOCOL or reply.get("version") != VERSION:
            raise ServeError(
                f"{self.where} answered the handshake with {json.dumps(reply)[:200]}; "
                f'answer {{"protocol": "{PROTOCOL}", "version": {VERSION}}}{self._said()}'
            )
        self._ready = True
        if self.ready_s is None:
            self.ready_s = time.monotonic() - self._started_at

    def _write(self, doc: Mapping[str, Any]) -> None:
        assert self._proc is not None
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(doc).encode() + b"\n")
            self._proc.stdin.flush()
        except OSError:
            raise ServeError(f"{self.where} {self._gone()}{self._said()}") from None

    def _read(self, timeout_s: float, what: str) -> dict[str, Any]:
        """The next line as a JSON object, within ``timeout_s``."""
        line = self._line(timeout_s, what)
        try:
            doc = json.loads(line)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise ServeError(
                f"{self.where} wrote {line[:200]!r} as its {what}, not one JSON object "
                f"on a line (logs belong on stderr){self._said()}"
            )
        return doc

    def _line(self, timeout_s: float, what: str) -> bytes:
        assert self._proc is not None
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise ServeError(
                        f"{self.where} gave no {what} within {timeout_s:.0f} s; answer each "
                        f"line with one line, and flush it{self._said()}"
                    )
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise ServeError(f"{self.where} {self._gone()}{self._said()}")
                self._buf += chunk
                if len(self._buf) > MAX_LINE_BYTES:
                    raise ServeError(f"{self.where} wrote a line of over {MAX_LINE_BYTES} bytes")
        line, _, self._buf = self._buf.partition(b"\n")
        return line.strip()

    def _gone(self) -> str:
        assert self._proc is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(CLOSE_GRACE_S)
        code = self._proc.returncode
        how = "closed its stdout" if code is None else f"exited {code}"
        return f"{how} mid-trial; keep it answering until its stdin closes"

    def _said(self) -> str:
        try:
            return stderr_tail(self.log.read_bytes())
        except OSError:
            return ""

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        self._ready = False
        if proc is None:
            return
        assert proc.stdout is not None
        end_group(proc, CLOSE_GRACE_S)
        proc.stdout.close()


class ServedPool:
    """The run's served commands of ``scope = "run"``: one process per op, which every
    trial's requests share; started on first use, stopped by :meth:`close`."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._served: dict[tuple[str, tuple[str, ...]], Served] = {}
        self._lock = threading.Lock()

    def get(self, op: str, argv: Sequence[str], *, cwd: Path, where: str) -> Served:
        with self._lock:
            key = (op, tuple(argv))
            if key not in self._served:
                log = self.log_dir / f"serve-{op}-{len(self._served) + 1}.log"
                self._served[key] = Served(op, argv, cwd=cwd, log=log, where=where, scope="run")
            return self._served[key]

    def close(self) -> None:
        with self._lock:
            served = list(self._served.values())
        for s in served:
            s.close()
