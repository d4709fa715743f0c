"""Hold matching and gate hand-off, without sockets or sleeps."""

from __future__ import annotations

import threading

import pytest

from harness.contract.errors import ConfigError, RendezvousTimeout
from harness.rendezvous import Connection, Gate, Hit, Holds, Rendezvous


def test_unarmed_points_match_nothing() -> None:
    holds = Holds()
    holds.arm("before_external_call", None, None, 1)
    assert holds.claim("after_claim", "j-1", 1) is None


def test_job_and_attempt_filters() -> None:
    holds = Holds()
    gate = holds.arm("after_claim", "j-2", 2, 1)
    assert holds.claim("after_claim", "j-1", 2) is None
    assert holds.claim("after_claim", "j-2", 1) is None
    assert holds.claim("after_claim", "j-2", 2) is gate


def test_a_step_hold_waits_for_that_step_only() -> None:
    holds = Holds()
    gate = holds.arm("before_external_call", "j-1", None, 1, step="notify")
    assert holds.claim("before_external_call", "j-1", 1) is None  # a single-step line
    assert holds.claim("before_external_call", "j-1", 1, "ticket") is None
    assert holds.claim("before_external_call", "j-1", 1, "notify") is gate


def test_a_hold_without_a_step_takes_any_step() -> None:
    holds = Holds()
    gate = holds.arm("after_claim", "j-1", None, 1)
    assert holds.claim("after_claim", "j-1", 1, "ticket") is gate


def test_times_counts_down_then_hits_pass() -> None:
    holds = Holds()
    gate = holds.arm("p", None, None, 2)
    assert holds.claim("p", "a", 1) is gate
    assert holds.claim("p", "b", 1) is gate
    assert holds.claim("p", "c", 1) is None


def test_first_armed_gate_wins() -> None:
    holds = Holds()
    first = holds.arm("p", None, None, 1)
    second = holds.arm("p", "j-1", None, 1)
    assert holds.claim("p", "j-1", 1) is first
    assert holds.claim("p", "j-1", 1) is second


def test_disarm() -> None:
    holds = Holds()
    gate = holds.arm("p", None, None, 3)
    holds.disarm(gate)
    assert holds.claim("p", None, None) is None


def test_times_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="times=0"):
        Holds().arm("p", None, None, 0)


def test_gate_timeout_names_point_and_job() -> None:
    gate = Gate("before_external_call", "j-0007", None, 1)
    with pytest.raises(RendezvousTimeout, match=r"'before_external_call'.*job='j-0007'"):
        gate.wait(0)


def test_gate_hands_over_hits_in_order() -> None:
    gate = Gate("p", None, None, 2)
    conn = Connection.__new__(Connection)  # never used for I/O here
    first = Hit("p", "j-1", 1, 10, 1.0, True, conn)
    second = Hit("p", "j-2", 1, 11, 2.0, True, conn)
    gate.deliver(first)
    gate.deliver(second)
    assert gate.wait(0) is first
    assert gate.wait(0) is second
    assert gate.hits == [first, second]


def test_socket_path_over_the_limit_is_refused_before_binding() -> None:
    long_path = "/tmp/" + "d" * 120 + "/fp.sock"
    with pytest.raises(ConfigError, match="UNIX socket limit"):
        Rendezvous(long_path)


class _Wire:
    """Stands in for a worker's socket: records the answers sent to it."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.sent.append(data)


def _wired_conn() -> tuple[Connection, _Wire]:
    conn = Connection.__new__(Connection)  # no socket: the wire records what a worker would read
    wire = _Wire()
    conn.sock = wire  # type: ignore[assignment]
    conn.lock = threading.Lock()
    conn.closed = threading.Event()
    conn.held = []
    return conn, wire


def test_disarm_lets_go_a_hit_held_that_nobody_took() -> None:
    # The waiter gave up on its deadline just as a worker came: without the let-go the
    # worker waits for an answer forever and its job never ends (a trial left
    # inconclusive by the harness, not the worker).
    rendezvous = Rendezvous.__new__(Rendezvous)
    rendezvous._holds = Holds()
    gate = rendezvous.hold("before_external_call")
    conn, wire = _wired_conn()
    assert rendezvous._holds.claim("before_external_call", "j-1", 1) is gate
    gate.deliver(Hit("before_external_call", "j-1", 1, 10, 1.0, True, conn))
    rendezvous.disarm(gate)
    assert wire.sent == [b'{"action": "continue"}\n']


def test_a_hit_claimed_before_disarm_and_delivered_after_is_refused() -> None:
    holds = Holds()
    gate = holds.arm("p", None, None, 1)
    assert holds.claim("p", "j-1", 1) is gate
    assert holds.disarm(gate) == []
    conn, _ = _wired_conn()
    assert gate.deliver(Hit("p", "j-1", 1, 10, 1.0, True, conn)) is False
    with pytest.raises(RendezvousTimeout):
        gate.wait(0)


def test_hits_taken_before_disarm_stay_held() -> None:
    holds = Holds()
    gate = holds.arm("p", None, None, 2)
    conn, wire = _wired_conn()
    gate.deliver(Hit("p", "j-1", 1, 10, 1.0, True, conn))
    taken = gate.wait(0)
    assert holds.disarm(gate) == []
    assert not taken._resumed
    assert wire.sent == []


def test_a_job_that_ends_moves_its_hold_to_the_next_job() -> None:
    holds = Holds()
    gate = holds.arm("after_external_call", "j-1", None, 1, then=["j-2", "j-3"])
    assert holds.claim("after_external_call", "j-2", 1) is None  # j-1 still runs
    assert holds.ended("j-2") == []  # not the job it aims at
    assert holds.ended("j-1") == [(gate, "j-2")]
    assert holds.claim("after_external_call", "j-1", 2) is None  # a late j-1 is let go
    assert holds.claim("after_external_call", "j-2", 1) is gate


def test_a_hold_moves_no_further_than_its_last_job() -> None:
    holds = Holds()
    gate = holds.arm("after_external_call", "j-1", None, 1, then=["j-2"])
    assert holds.ended("j-1") == [(gate, "j-2")]
    assert holds.ended("j-2") == []
    assert holds.claim("after_external_call", "j-2", 2) is gate
