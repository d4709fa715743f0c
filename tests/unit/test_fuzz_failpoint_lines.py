"""The failpoint wire, fuzzed: any bytes a worker sends become a message or a BadLine."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from harness.rendezvous_wire import (
    MAX_LINE_BYTES,
    BadLine,
    FailpointLine,
    LineBuffer,
    LineTooLong,
    parse_line,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "point": json_values | st.sampled_from(["after_claim", "", " ", "no_such_point"]),
        "job": json_values,
        "attempt": json_values,
        "pid": json_values,
        "worker": json_values,
    },
)


def _one_line(value: object) -> bytes:
    return json.dumps(value).encode()


@given(st.binary(max_size=300))
@example(b"[" * 100_000)  # json.loads recursed into a RecursionError (found by this test)
@example(b'{"point": ' * 50_000)
@example(b"\xff\xfe")
@example(b'{"point": null}')
@example(b'{"point": "p", "job": true}')
def test_any_bytes_parse_or_raise_bad_line(line: bytes) -> None:
    try:
        msg = parse_line(line)
    except BadLine as exc:
        reason = str(exc)
    else:
        assert isinstance(msg, FailpointLine)
        assert msg.point.strip()
        return
    assert "\n" not in reason
    assert len(reason) < 400, "the history keeps a clipped line, not the whole of it"


def _acceptable(doc: dict[str, object]) -> bool:
    """What the protocol accepts: a non-empty point; a job that is a string (or a number)."""
    point, job = doc.get("point"), doc.get("job")
    point_ok = isinstance(point, str) and bool(point.strip())
    job_ok = job is None or (isinstance(job, str | int) and not isinstance(job, bool))
    return point_ok and job_ok


@given(messages)
def test_any_json_object_parses_or_raises_bad_line(doc: dict[str, object]) -> None:
    try:
        msg = parse_line(_one_line(doc))
    except BadLine:
        assert not _acceptable(doc)
        return
    assert _acceptable(doc)
    assert msg.point == doc["point"]
    for value in (msg.attempt, msg.pid):
        assert value is None or (isinstance(value, int) and not isinstance(value, bool))


def test_a_well_formed_line_keeps_every_field() -> None:
    line = _one_line({"point": "after_claim", "job": "j-1", "attempt": 2, "pid": 9, "worker": "w1"})
    assert parse_line(line) == FailpointLine("after_claim", "j-1", 2, 9, "w1")


@given(st.lists(st.binary(max_size=60), max_size=12))
def test_the_buffer_yields_each_complete_line_once(chunks: list[bytes]) -> None:
    buffer = LineBuffer()
    got: list[bytes] = []
    for chunk in chunks:
        got += buffer.feed(chunk)
    stream = b"".join(chunks)
    *complete, rest = stream.split(b"\n")
    assert got == [x for x in complete if x.strip()]
    assert buffer.pending == rest


@given(st.integers(41, 300), st.booleans())
def test_a_line_that_never_ends_is_refused(more: int, newline_after: bool) -> None:
    buffer = LineBuffer(limit=100)
    assert buffer.feed(b"x" * 60) == []  # under the limit: kept for the rest of the line
    last = b"x" * more + (b"\n" if newline_after else b"")
    with pytest.raises(LineTooLong, match="over 100 bytes"):
        buffer.feed(last)
    assert buffer.pending == b"", "the refused bytes are let go"


def test_the_default_limit_is_far_above_a_real_line() -> None:
    line = _one_line({"point": "before_external_call", "job": "j" * 200, "attempt": 1, "pid": 1})
    assert len(line) * 100 < MAX_LINE_BYTES
    assert LineBuffer().feed(line + b"\n") == [line]


def test_the_callers_file_and_line_are_kept_and_a_bad_one_dropped() -> None:
    line = b'{"point": "after_claim", "job": "j-1", "file": "/w/worker.js", "line": 42}'
    msg = parse_line(line)
    assert (msg.file, msg.line) == ("/w/worker.js", 42)
    odd = parse_line(b'{"point": "after_claim", "file": 7, "line": "42"}')
    assert (odd.file, odd.line) == (None, None)
