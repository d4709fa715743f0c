"""What a target's commands print that the harness reads besides their exit: the
enqueue command's word that its queue refused a job it already holds, and a failing
command's last stderr lines (a traceback ends with its message; its first line says
nothing)."""

from __future__ import annotations

import json


def refused_line(stdout: bytes) -> bool:
    """The enqueue command said its queue refused the job as one it already holds: a
    line of its output is ``{"queued": false}`` (docs/getting-started.md)."""
    for line in stdout.decode(errors="replace").splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("queued") is False:
            return True
    return False


#: How much of a failing command's stderr its one-line error carries.
STDERR_TAIL_LINES = 3
STDERR_TAIL_CHARS = 400


def stderr_tail(stderr: bytes) -> str:
    """`` (stderr: ...)`` with the last non-empty lines joined by `` | ``, on one line."""
    lines = [ln.strip() for ln in stderr.decode(errors="replace").splitlines() if ln.strip()]
    if not lines:
        return " (nothing on stderr)"
    tail = " | ".join(lines[-STDERR_TAIL_LINES:])
    if len(tail) > STDERR_TAIL_CHARS:
        tail = "..." + tail[-STDERR_TAIL_CHARS:]
    return f" (stderr, last lines: {tail})"
