"""Hold matching and gate hand-off, without sockets or sleeps."""

from __future__ import annotations

import pytest

from harness.contract.errors import ConfigError, RendezvousTimeout
from harness.rendezvous import Gate, Hit, Holds, Rendezvous, _Conn


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
    conn = _Conn.__new__(_Conn)  # never used for I/O here
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
