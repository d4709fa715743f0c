"""Fault arming, matching and the hold rendezvous, without a server."""

from __future__ import annotations

import threading

import pytest

from fake_providers.faults import FaultBoard, Hold
from fake_providers.models import Fault
from fake_providers.problems import Problem


def _hold(board: FaultBoard, fault_id: str, arrival_id: int = 1) -> Hold:
    return Hold(fault_id, "hold_after_commit", arrival_id, "j-1", None, None, True, 1)


def test_fault_is_used_times_then_gone() -> None:
    board = FaultBoard()
    board.arm(Fault("fail_before_commit", times=2))
    takes = [board.take(("fail_before_commit",), job="j", key=None, marker=None) for _ in range(3)]
    assert [t is not None for t in takes] == [True, True, False]


@pytest.mark.parametrize(
    ("fault", "matches"),
    [
        (Fault("fail_before_commit"), True),
        (Fault("fail_before_commit", job="j-1"), True),
        (Fault("fail_before_commit", job="j-2"), False),
        (Fault("fail_before_commit", key="k"), True),
        (Fault("fail_before_commit", key="other"), False),
        (Fault("fail_before_commit", marker="m"), True),
        (Fault("fail_before_commit", job="j-1", marker="x"), False),
        (Fault("fail_lookup"), False),
    ],
)
def test_matching(fault: Fault, matches: bool) -> None:
    board = FaultBoard()
    board.arm(fault)
    got = board.take(("fail_before_commit",), job="j-1", key="k", marker="m")
    assert (got is not None) == matches


def test_first_armed_matching_fault_wins() -> None:
    board = FaultBoard()
    first = board.arm(Fault("fail_before_commit", job="j-1"))
    board.arm(Fault("fail_before_commit"))
    got = board.take(("fail_before_commit",), job="j-1", key=None, marker=None)
    assert got is not None
    assert got.id == first


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"action": "explode"}, "action='explode'"),
        ({"action": "fail_lookup", "times": 0}, "times=0"),
        ({"action": "fail_before_commit", "status": 404}, "status=404"),
        ({"action": "delay_response", "delay_s": -1}, "delay_s=-1"),
        # Types too: these arrive as JSON and would otherwise fail only while answering.
        ({"action": "fail_lookup", "status": 200}, "status=200"),
        ({"action": "fail_lookup", "status": "503"}, "status='503'"),
        ({"action": "fail_lookup", "status": True}, "status=True"),
        ({"action": "fail_lookup", "times": 1.5}, "times=1.5"),
        ({"action": "fail_lookup", "job": 7}, "job=7"),
        ({"action": 5}, "action=5"),
        ({"action": "delay_response", "delay_s": float("nan")}, "delay_s=nan"),
        ({"action": "delay_response", "delay_s": float("inf")}, "delay_s=inf"),
        ({"action": "delay_response", "delay_s": "1"}, "delay_s='1'"),
    ],
)
def test_bad_faults_name_the_value(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        Fault(**kwargs)  # type: ignore[arg-type]


def test_json_integers_written_with_a_fraction_are_integers() -> None:
    fault = Fault.from_json({"action": "fail_lookup", "times": 3.0, "status": 502.0})
    assert (fault.times, fault.status) == (3, 502)
    assert isinstance(fault.times, int)
    with pytest.raises(ValueError, match=r"times=2\.5"):
        Fault.from_json({"action": "fail_lookup", "times": 2.5})


def test_wait_held_returns_the_held_request_and_release_wakes_it() -> None:
    board = FaultBoard()
    fault_id = board.arm(Fault("hold_after_commit"))
    armed = board.take(("hold_after_commit",), job="j-1", key=None, marker=None)
    assert armed is not None
    outcomes: list[str] = []
    t = threading.Thread(target=lambda: outcomes.append(board.hold(armed, _hold(board, fault_id))))
    t.start()
    held = board.wait_held(fault_id, 10.0)
    assert held is not None
    assert held.arrival_id == 1
    assert board.release(fault_id, "drop") == 1
    t.join(10.0)
    assert outcomes == ["drop"]
    assert board.release(fault_id, "drop") == 0


def test_reset_drops_every_hold() -> None:
    board = FaultBoard()
    fault_id = board.arm(Fault("hold_before_commit"))
    armed = board.take(("hold_before_commit",), job=None, key=None, marker=None)
    assert armed is not None
    outcomes: list[str] = []
    t = threading.Thread(target=lambda: outcomes.append(board.hold(armed, _hold(board, fault_id))))
    t.start()
    assert board.wait_held(fault_id, 10.0) is not None
    assert board.reset() == 1
    t.join(10.0)
    assert outcomes == ["drop"]
    assert board.snapshot() == []


def test_a_forgotten_hold_ends_as_a_drop() -> None:
    board = FaultBoard(hold_max_s=0.0)
    fault_id = board.arm(Fault("hold_after_commit"))
    armed = board.take(("hold_after_commit",), job=None, key=None, marker=None)
    assert armed is not None
    assert board.hold(armed, _hold(board, fault_id)) == "drop"


def test_closed_board_never_holds() -> None:
    board = FaultBoard()
    fault_id = board.arm(Fault("hold_after_commit"))
    armed = board.take(("hold_after_commit",), job=None, key=None, marker=None)
    assert armed is not None
    board.close()
    assert board.hold(armed, _hold(board, fault_id)) == "drop"


def test_disarm_keeps_held_requests_held() -> None:
    board = FaultBoard()
    fault_id = board.arm(Fault("hold_after_commit", times=2))
    armed = board.take(("hold_after_commit",), job=None, key=None, marker=None)
    assert armed is not None
    t = threading.Thread(target=board.hold, args=(armed, _hold(board, fault_id)))
    t.start()
    assert board.wait_held(fault_id, 10.0) is not None
    board.disarm_all()
    assert board.take(("hold_after_commit",), job=None, key=None, marker=None) is None
    assert board.release(fault_id, "commit") == 1
    t.join(10.0)


def test_waiting_on_a_fault_that_never_holds_is_refused() -> None:
    board = FaultBoard()
    fault_id = board.arm(Fault("fail_lookup"))
    with pytest.raises(Problem, match="never holds"):
        board.wait_held(fault_id, 0.0)
