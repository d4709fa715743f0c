"""Worker-side failpoint client (the stable protocol, any language).

When ``CRASHPOINT_FAILPOINTS`` names a UNIX socket, :func:`failpoint` writes one JSON line
``{"point": ..., "job": ..., "attempt": ..., "pid": ...}`` (plus, optionally, ``"worker"``:
the worker's ``CRASHPOINT_WORKER_ID``, ``"step"``: which step of a multi-step job, and
``"file"``/``"line"``: where in the worker's source the failpoint was called)
and blocks until it reads one line back (``{"action": "continue"}``). While the worker
is blocked the harness may kill or pause it, so a signal lands exactly at the boundary.
When the variable is unset the call is a global lookup and a return: well under a
microsecond.

A Node.js or Go worker needs the same twenty lines: connect once, write a line, read a line.

:func:`job_end` is the same exchange at the point ``job_end``, with the job's
``outcome`` (``done``, ``needs_review`` or ``dead_lettered``) on the line: the worker says
a job has reached its end, and the harness, which otherwise polls the target's status
command to learn it, stops waiting for that job at once. A harness that predates it
reads an ordinary failpoint and answers continue.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading

from harness.contract.env import FAILPOINTS, WORKER_ID

#: The one reply the harness sends today; a client treats any other action as continue.
CONTINUE = "continue"
CONTINUE_LINE = b'{"action": "continue"}\n'
#: The point a job-end event is sent at, and the outcomes it may carry.
JOB_END = "job_end"
JOB_OUTCOMES = ("done", "needs_review", "dead_lettered")

_path: str | None = os.environ.get(FAILPOINTS) or None
_worker: str | None = os.environ.get(WORKER_ID) or None
_sock: socket.socket | None = None
_reader: object = None
_lock = threading.Lock()


def enabled() -> bool:
    return _path is not None


def failpoint(point: str, job: str, attempt: int, step: str | None = None) -> str:
    """Report reaching ``point`` (of ``step``, in a multi-step job) and wait for the
    harness; returns the action it chose."""
    if _path is None:
        return CONTINUE
    # The caller's frame: a report can point at the boundary in the worker's own source.
    caller = sys._getframe(1)
    return _rendezvous(point, job, attempt, step, (caller.f_code.co_filename, caller.f_lineno))


def job_end(job: str, outcome: str, attempt: int | None = None) -> None:
    """Tell the harness ``job`` has ended with ``outcome`` (one of :data:`JOB_OUTCOMES`):
    call it once the end is durable (written where the status command reads it)."""
    if _path is not None:
        _rendezvous(JOB_END, job, attempt, outcome=outcome)


def _rendezvous(
    point: str,
    job: str,
    attempt: int | None,
    step: str | None = None,
    where: tuple[str, int] | None = None,
    outcome: str | None = None,
) -> str:
    global _sock, _reader, _path
    message: dict[str, object] = {"point": point, "job": job, "attempt": attempt}
    message["pid"] = os.getpid()
    if where is not None:
        message["file"], message["line"] = os.path.abspath(where[0]), where[1]
    if outcome is not None:
        message["outcome"] = outcome
    if _worker is not None:
        message["worker"] = _worker
    if step is not None:
        # Only multi-step jobs name a step: a single-step line is what it always was.
        message["step"] = step
    line = json.dumps(message)
    with _lock:
        try:
            if _sock is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                assert _path is not None
                sock.connect(_path)
                _sock = sock
                _reader = sock.makefile("r", encoding="utf-8")
            _sock.sendall(line.encode() + b"\n")
            reply = _reader.readline()  # type: ignore[attr-defined]
        except OSError:
            reply = ""
        if not reply:
            # The harness went away: from now on behave as if failpoints were off, rather
            # than hang or die on a dead socket.
            if _sock is not None:
                _sock.close()
            _sock, _reader, _path = None, None, None
            return CONTINUE
    action = json.loads(reply).get("action", CONTINUE)
    return str(action)
