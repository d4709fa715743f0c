"""Reading the failpoint wire: bytes from a worker's connection into checked lines.

No I/O here, so every input a hostile or broken worker can send is unit-testable (and
fuzzed: tests/unit/test_fuzz_failpoint_lines.py). :class:`LineBuffer` splits a
connection's bytes into lines and refuses a line that never ends; :func:`parse_line`
turns one line into a :class:`FailpointLine` or raises :class:`BadLine` with a one-line
reason the rendezvous writes into the trial's history.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

#: A failpoint line is a few dozen bytes; one this long is not a failpoint client talking.
MAX_LINE_BYTES = 64 * 1024
#: Bad lines tolerated on one connection before it is dropped: a worker with a buggy
#: client gets told (and answered) a few times, a stream of garbage cannot flood the
#: history with notes.
MAX_BAD_LINES = 3
#: How much of a bad line the history keeps.
SHOWN_BYTES = 120


class BadLine(ValueError):
    """A line that is not a failpoint message; ``str()`` is the one-line reason."""


class LineTooLong(BadLine):
    """More than :data:`MAX_LINE_BYTES` without a newline."""


@dataclass(frozen=True)
class FailpointLine:
    """One worker's report of reaching a boundary."""

    point: str
    job: str | None
    attempt: int | None
    pid: int | None
    #: The worker's ``CRASHPOINT_WORKER_ID``, when its client sends it.
    worker: str | None
    #: The step of a multi-step job (an older client sends none).
    step: str | None = None
    #: The declared provider the boundary's call goes to (an older client sends none).
    provider: str | None = None
    #: Where in the worker's source the failpoint was called (an older client sends none).
    file: str | None = None
    line: int | None = None
    #: A ``job_end`` line's outcome (``done``, ``needs_review``, ``dead_lettered``).
    outcome: str | None = None


def parse_line(line: bytes) -> FailpointLine:
    """The message in ``line`` (without its newline); :class:`BadLine` if it is not one."""
    try:
        msg = json.loads(line)
    except UnicodeDecodeError:
        raise BadLine(f"not UTF-8 text: {shown(line)}") from None
    except ValueError as exc:
        raise BadLine(f"not JSON ({exc.args[0] if exc.args else exc}): {shown(line)}") from None
    except RecursionError:
        # json.loads recurses per nesting level: "[[[[..." deep enough overflows the stack.
        raise BadLine(f"JSON nested too deeply: {shown(line)}") from None
    if not isinstance(msg, dict):
        raise BadLine(f"not a JSON object: {shown(line)}")
    point = msg.get("point")
    if not isinstance(point, str) or not point.strip():
        raise BadLine(f"no point (a non-empty string) in {shown(line)}")
    job = msg.get("job")
    if isinstance(job, bool) or not isinstance(job, str | int | None):
        raise BadLine(f"job must be a string, got {shown(json.dumps(job).encode())}")
    return FailpointLine(
        point=point,
        job=None if job is None else str(job),
        attempt=_whole(msg.get("attempt")),
        pid=_whole(msg.get("pid")),
        worker=msg.get("worker") if isinstance(msg.get("worker"), str) else None,
        step=msg.get("step") if isinstance(msg.get("step"), str) else None,
        provider=msg.get("provider") if isinstance(msg.get("provider"), str) else None,
        file=msg.get("file") if isinstance(msg.get("file"), str) and msg["file"] else None,
        line=_whole(msg.get("line")),
        outcome=msg.get("outcome") if isinstance(msg.get("outcome"), str) else None,
    )


def _whole(value: object) -> int | None:
    """An int field, or None for anything else (a bool is not a number here)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def shown(data: bytes) -> str:
    """``data`` as the history shows it: its repr, clipped."""
    if len(data) <= SHOWN_BYTES:
        return repr(data)
    return f"{data[:SHOWN_BYTES]!r}... ({len(data)} bytes)"


class LineBuffer:
    """One connection's unread bytes, split into complete lines."""

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self.limit = limit
        self._buf = b""

    @property
    def pending(self) -> bytes:
        """Bytes received after the last newline (a partial line)."""
        return self._buf

    def feed(self, data: bytes) -> list[bytes]:
        """The complete, non-blank lines ``data`` finishes; raises :class:`LineTooLong` when
        a line runs past the limit (the connection is then beyond saving)."""
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        too_long = next((x for x in lines if len(x) > self.limit), None)
        if too_long is None and len(self._buf) > self.limit:
            too_long = self._buf
        if too_long is not None:
            self._buf = b""
            raise LineTooLong(
                f"a line of over {self.limit} bytes ({len(too_long)} so far): {shown(too_long)}"
            )
        return [x for x in lines if x.strip()]
