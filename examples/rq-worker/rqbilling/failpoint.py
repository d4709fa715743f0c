"""The failpoint protocol, client side: one JSON line out, one line back, per boundary.

With ``CRASHPOINT_FAILPOINTS`` naming a UNIX socket, each boundary writes
``{"point", "job", "attempt", "pid", "worker", "provider", "file", "line"}`` and blocks
until the harness answers (``{"action": "continue"}``); meanwhile it may kill or stop this
process, so the signal lands exactly there. Unset, a failpoint returns at once. If the
harness goes away the worker carries on as if failpoints were off. :func:`job_end` is the
same exchange at the point ``job_end``, with the job's outcome: the harness then knows the
job has ended without asking the status command.
"""

from __future__ import annotations

import json
import os
import socket
import sys

_path = os.environ.get("CRASHPOINT_FAILPOINTS") or ""
_worker = os.environ.get("CRASHPOINT_WORKER_ID") or ""
_sock: socket.socket | None = None
_buf = b""


def failpoint(point: str, job: str, attempt: int, provider: str | None = None) -> None:
    if _path:
        _exchange({"point": point, "job": job, "attempt": attempt, "provider": provider})


def job_end(job: str, outcome: str, attempt: int) -> None:
    """``outcome``: done, needs_review or dead_lettered, once it is durable in the record."""
    if _path:
        _exchange({"point": "job_end", "job": job, "attempt": attempt, "outcome": outcome})


def _exchange(fields: dict[str, object]) -> None:
    global _sock, _path, _buf
    line = {k: v for k, v in fields.items() if v is not None}
    line.update(pid=os.getpid(), worker=_worker)
    # The caller's file and line (two frames up: failpoint or job_end, then its caller):
    # a report points at the boundary in this worker's source.
    caller = sys._getframe(2)
    line.update(file=os.path.abspath(caller.f_code.co_filename), line=caller.f_lineno)
    try:
        if _sock is None:
            _sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            _sock.connect(_path)
        _sock.sendall(json.dumps(line).encode() + b"\n")
        while b"\n" not in _buf:
            chunk = _sock.recv(4096)
            if not chunk:
                raise OSError("failpoint socket closed")
            _buf += chunk
        _, _buf = _buf.split(b"\n", 1)
    except OSError:
        if _sock is not None:
            _sock.close()
        _sock, _path = None, ""
