"""The worker reads a provider's answer off the wire: no sockets, bytes in memory."""

from __future__ import annotations

import io

import pytest

from scenarios.worker.http import (
    BadResponse,
    BadStatusLine,
    IncompleteRead,
    RemoteDisconnected,
    read_answer,
)


def wire(*lines: str, body: bytes = b"") -> io.BufferedReader:
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    return io.BufferedReader(io.BytesIO(raw))


def test_status_headers_and_a_body_of_its_content_length() -> None:
    answer = read_answer(
        wire(
            "HTTP/1.1 201 Created",
            "Content-Type: application/json",
            "Content-Length: 9",
            "Idempotent-Replayed: true",
            body=b'{"id": 1}trailing',
        )
    )
    assert (answer.status, answer.read()) == (201, b'{"id": 1}')
    assert ("Idempotent-Replayed", "true") in answer.getheaders()


def test_interim_answers_are_skipped() -> None:
    raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    answer = read_answer(io.BufferedReader(io.BytesIO(raw)))
    assert (answer.status, answer.read()) == (200, b"ok")


def test_without_a_length_the_body_runs_to_the_close() -> None:
    answer = read_answer(wire("HTTP/1.1 200 OK", "Connection: close", body=b"all of it"))
    assert answer.read() == b"all of it"


def test_a_chunked_body_is_joined() -> None:
    body = b"4\r\nabcd\r\n3;ext=1\r\nefg\r\n0\r\nX-Trailer: 1\r\n\r\n"
    answer = read_answer(wire("HTTP/1.1 200 OK", "Transfer-Encoding: chunked", body=body))
    assert answer.read() == b"abcdefg"


def test_a_head_answer_has_no_body() -> None:
    answer = read_answer(wire("HTTP/1.1 200 OK", "Content-Length: 5"), head=True)
    assert (answer.status, answer.read()) == (200, b"")


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"", RemoteDisconnected),
        (b"SSH-2.0-OpenSSH\r\n\r\n", BadStatusLine),
        (b"HTTP/1.1 abc Nope\r\n\r\n", BadStatusLine),
        (b"HTTP/1.1 200 OK\r\nContent-Len", IncompleteRead),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", BadResponse),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\npar", IncompleteRead),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", BadResponse),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nab", IncompleteRead),
    ],
)
def test_what_is_not_a_whole_answer_is_a_bad_response(raw: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        read_answer(io.BufferedReader(io.BytesIO(raw)))


def test_a_peer_that_closes_early_is_a_reset_too() -> None:
    # Transport sorts socket errors and bad answers alike as "may have landed".
    assert issubclass(RemoteDisconnected, ConnectionResetError)
    assert issubclass(RemoteDisconnected, BadResponse)
