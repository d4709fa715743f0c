"""The failpoint socket under bad clients: random bytes, partial, huge and invalid lines,
early disconnects, a client that never reads. The rendezvous answers or drops each with a
note in the history, keeps serving, and a well-formed worker afterwards still works."""

from __future__ import annotations

import json
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.history import History
from harness.rendezvous import Rendezvous
from harness.rendezvous_wire import MAX_LINE_BYTES

pytestmark = pytest.mark.process

GOOD = b'{"point": "after_claim", "job": "j-good", "attempt": 1, "pid": 1}\n'
CONTINUE = {"action": "continue"}


@pytest.fixture
def served() -> Iterator[tuple[Rendezvous, History]]:
    history = History()
    with (
        tempfile.TemporaryDirectory(prefix="cp-") as d,
        Rendezvous(Path(d) / "fp.sock", history=history) as rv,
    ):
        yield rv, history


def connect(rv: Rendezvous) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5.0)  # a reply that never comes fails the test instead of hanging it
    sock.connect(str(rv.path))
    return sock


def good_client_works(rv: Rendezvous) -> None:
    with connect(rv) as sock:
        sock.sendall(GOOD)
        assert json.loads(sock.makefile("rb").readline()) == CONTINUE


def notes(history: History) -> list[str]:
    return [str(e.fields.get("text")) for e in history.events() if e.kind == "note"]


def read_until_closed(sock: socket.socket) -> bytes:
    """What the rendezvous answered before it closed the connection. A rendezvous that
    drops a client with bytes still unread closes with a reset, not an end of stream:
    both are the drop the protocol allows, and what came before it is still checked."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


chunks = st.lists(
    st.binary(max_size=200)
    | st.sampled_from([b"\n", b"{", b'{"point": 1}\n', b"[" * 5000 + b"\n", b"\xff\n"]),
    max_size=6,
)


@settings(
    max_examples=30,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(chunks, st.booleans())
def test_any_client_leaves_the_rendezvous_serving(
    served: tuple[Rendezvous, History], sent: list[bytes], read_replies: bool
) -> None:
    rv, _ = served
    with connect(rv) as sock:
        for chunk in sent:
            try:
                sock.sendall(chunk)
            except OSError:
                break  # dropped by the rendezvous: allowed
        if read_replies:
            sock.shutdown(socket.SHUT_WR)
            for line in read_until_closed(sock).splitlines():
                assert json.loads(line) == CONTINUE
    good_client_works(rv)


def test_deeply_nested_json_is_a_bad_line_not_a_dead_server(
    served: tuple[Rendezvous, History],
) -> None:
    rv, history = served
    with connect(rv) as sock:
        sock.sendall(b"[" * 60_000 + b"\n")  # under the line limit, over the stack
        assert json.loads(sock.makefile("rb").readline()) == CONTINUE
    good_client_works(rv)
    assert any("nested too deeply" in n for n in notes(history)), notes(history)


def test_a_huge_line_is_dropped_with_a_note(served: tuple[Rendezvous, History]) -> None:
    rv, history = served
    with connect(rv) as sock:
        try:
            for _ in range(64):
                sock.sendall(b"x" * MAX_LINE_BYTES)
            answer = read_until_closed(sock)
        except (BrokenPipeError, ConnectionResetError):
            answer = b""  # dropped while still sending: the expected end
    assert answer == b"", "a line that never ends gets no answer, only the drop"
    good_client_works(rv)
    assert any("bytes" in n and "connection dropped" in n for n in notes(history))


def test_repeated_garbage_is_dropped_after_a_few_answers(
    served: tuple[Rendezvous, History],
) -> None:
    rv, history = served
    with connect(rv) as sock:
        sock.sendall(b"not json\n" * 10)
        replies = read_until_closed(sock).splitlines()
    assert 1 <= len(replies) < 10, "answered a few times, then dropped"
    assert any("connection dropped" in n for n in notes(history))
    good_client_works(rv)


def test_early_disconnect_mid_line_is_noted(served: tuple[Rendezvous, History]) -> None:
    rv, history = served
    with connect(rv) as sock:
        sock.sendall(b'{"point": "after_cl')
    good_client_works(rv)  # served after the disconnect was read: the note is in
    assert any("disconnected mid-line" in n for n in notes(history)), notes(history)


def test_a_client_that_never_reads_does_not_block_the_others(
    served: tuple[Rendezvous, History],
) -> None:
    """Valid lines without reading replies fill the socket buffer; the one serving thread
    must not wait on it forever."""
    rv, history = served
    flooder = connect(rv)
    stop = threading.Event()

    def flood() -> None:
        line = GOOD.replace(b"j-good", b"j-flood")
        while not stop.is_set():
            try:
                flooder.sendall(line * 256)
            except OSError:
                return

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    try:
        for _ in range(3):
            good_client_works(rv)
        thread.join(10)
        assert not thread.is_alive(), "the flooder was never dropped"
    finally:
        stop.set()
        flooder.close()
        thread.join(5)
    assert any("not reading its replies" in n for n in notes(history)), notes(history)[-3:]


def test_an_idle_partial_line_does_not_block_a_held_worker(
    served: tuple[Rendezvous, History],
) -> None:
    rv, _ = served
    gate = rv.hold("after_claim", job="j-good")
    with connect(rv) as idle, connect(rv) as worker:
        idle.sendall(b'{"point": "after_claim", "job"')
        worker.sendall(GOOD)
        hit = gate.wait(5.0)
        assert (hit.job, hit.held) == ("j-good", True)
        assert hit.resume()
        assert json.loads(worker.makefile("rb").readline()) == CONTINUE
