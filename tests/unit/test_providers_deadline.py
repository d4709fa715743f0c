"""A hold's own deadline (``release_after_s``, ``release_by``): parsed, checked, kept."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_providers.app import ProviderApp, Reply, Request
from fake_providers.faults import FaultBoard
from fake_providers.models import Fault
from fake_providers.store import Store
from harness.observe import release_event

JSON = {"content-type": "application/json"}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[ProviderApp]:
    store = Store(tmp_path / "p.db", provider="idempotent")
    board = FaultBoard(hold_max_s=30.0)
    yield ProviderApp(kind="idempotent", name="idempotent", store=store, board=board)
    board.close()
    store.close()


def _post(app: ProviderApp, path: str, body: Any) -> Reply:
    return app.handle(Request("POST", path, JSON, json.dumps(body).encode()))


def _write(app: ProviderApp, job: str) -> Reply:
    h = dict(JSON, **{"idempotency-key": job})
    return app.handle(Request("POST", app.write_path, h, json.dumps({"job_id": job}).encode()))


def _detail(reply: Reply) -> str:
    return str(json.loads(reply.body)["detail"])


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, "1", True])
def test_a_bad_deadline_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(ValueError, match="release_after_s"):
        Fault("hold_before_commit", release_after_s=bad)  # type: ignore[arg-type]


def test_a_deadline_is_for_holds_only() -> None:
    with pytest.raises(ValueError, match="hold faults only"):
        Fault("delay_response", delay_s=1.0, release_after_s=1.0)


def test_an_unknown_release_outcome_is_refused() -> None:
    with pytest.raises(ValueError, match="release_outcome='explode'"):
        Fault("hold_before_commit", release_after_s=1.0, release_outcome="explode")


def test_a_deadline_round_trips_through_json() -> None:
    f = Fault("hold_after_commit", release_after_s=2.5, release_outcome="drop")
    assert Fault.from_json(json.loads(json.dumps(f.to_json()))) == f
    assert Fault.from_json({"action": "hold_before_commit"}).release_after_s is None


def test_arming_a_bad_deadline_is_422(app: ProviderApp) -> None:
    reply = _post(app, "/_control/faults", {"action": "hold_before_commit", "release_after_s": -2})
    assert reply.status == 422
    assert "release_after_s=-2" in _detail(reply)


def test_a_deadline_past_the_hold_limit_is_422(app: ProviderApp) -> None:
    # The limit would drop the request first, which is not what was asked.
    reply = _post(app, "/_control/faults", {"action": "hold_before_commit", "release_after_s": 31})
    assert reply.status == 422
    assert "hold limit of 30 s" in _detail(reply)


def test_a_hold_past_its_deadline_commits_with_no_release(app: ProviderApp) -> None:
    fault_id = app.board.arm(Fault("hold_before_commit", job="j-1", release_after_s=0.0))
    assert _write(app, "j-1").status == 201  # let go at once, in this thread
    [effect] = app.store.effects()
    [release] = app.store.releases()
    assert release["arrival_id"] == effect["arrival_id"]
    assert (release["fault_id"], release["outcome"], release["released_by"]) == (
        fault_id,
        "commit",
        "deadline",
    )


def test_a_deadline_can_drop(app: ProviderApp) -> None:
    app.board.arm(
        Fault("hold_before_commit", job="j-1", release_after_s=0.0, release_outcome="drop")
    )
    assert _write(app, "j-1").drop
    assert app.store.effects() == []
    assert [r["outcome"] for r in app.store.releases()] == ["drop"]


def test_a_release_after_the_deadline_is_harmless_and_says_how_it_ended(app: ProviderApp) -> None:
    fault_id = app.board.arm(Fault("hold_before_commit", job="j-1", release_after_s=0.0))
    _write(app, "j-1")
    reply = _post(app, f"/_control/faults/{fault_id}/release", {"outcome": "drop"})
    assert reply.status == 200
    doc = json.loads(reply.body)
    assert doc["released"] == 0
    [earlier] = doc["earlier"]
    assert (earlier["outcome"], earlier["released_by"]) == ("commit", "deadline")
    assert len(app.store.effects()) == 1


def _get(app: ProviderApp, path: str) -> Reply:
    return app.handle(Request("GET", path, {}, b""))


def test_a_hold_its_deadline_let_go_before_the_wait_is_still_met(app: ProviderApp) -> None:
    # On a loaded machine the harness may ask after a short deadline passed: the request
    # was held all the same, and a wait that missed it would call the boundary unreached.
    fault_id = app.board.arm(Fault("hold_before_commit", job="j-1", release_after_s=0.0))
    _write(app, "j-1")
    reply = _get(app, f"/_control/faults/{fault_id}/held?timeout_s=0")
    assert reply.status == 200
    held = json.loads(reply.body)
    assert (held["job_id"], held["released_by"]) == ("j-1", "deadline")
    later = _get(app, f"/_control/faults/{fault_id}/held?timeout_s=0&after={held['arrival_id']}")
    assert later.status == 408


def test_a_hold_the_harness_let_go_is_not_met_again(app: ProviderApp) -> None:
    fault_id = app.board.arm(Fault("hold_before_commit", job="j-1"))
    t = threading.Thread(target=lambda: _write(app, "j-1"))
    t.start()
    held = app.board.wait_held(fault_id, 10.0)
    assert held is not None
    assert held.released_by is None
    assert app.board.release(fault_id, "commit") == 1
    t.join(10.0)
    assert _get(app, f"/_control/faults/{fault_id}/held?timeout_s=0").status == 408


def test_a_bad_after_is_400(app: ProviderApp) -> None:
    fault_id = app.board.arm(Fault("hold_before_commit"))
    reply = _get(app, f"/_control/faults/{fault_id}/held?timeout_s=0&after=-1")
    assert reply.status == 400
    assert "after=" in _detail(reply)


def test_a_bad_release_by_is_422(app: ProviderApp) -> None:
    fault_id = app.board.arm(Fault("hold_before_commit"))
    for bad in ("soon", True, [1.0]):
        reply = _post(app, f"/_control/faults/{fault_id}/release", {"release_by": bad})
        assert reply.status == 422
        assert "release_by=" in _detail(reply)


def test_a_release_by_already_past_lets_the_held_request_go(app: ProviderApp) -> None:
    fault_id = app.board.arm(Fault("hold_before_commit", job="j-1"))
    replies: list[Reply] = []
    t = threading.Thread(target=lambda: replies.append(_write(app, "j-1")))
    t.start()
    held = app.board.wait_held(fault_id, 10.0)
    assert held is not None
    reply = _post(app, f"/_control/faults/{fault_id}/release", {"release_by": 0.0})
    assert json.loads(reply.body) == {"released": 0, "scheduled": 1, "earlier": []}
    t.join(10.0)
    assert replies[0].status == 201
    assert [r["released_by"] for r in app.store.releases()] == ["deadline"]


def test_a_release_record_becomes_a_history_event() -> None:
    record = {
        "id": 3,
        "provider": "idempotent",
        "arrival_id": 7,
        "fault_id": "f-1",
        "action": "hold_before_commit",
        "job_id": "j-1",
        "outcome": "commit",
        "released_by": "deadline",
        "t_mono": 12.5,
        "t_wall": 1.0,
    }
    event = release_event(record)
    assert (event.t, event.source, event.kind, event.job) == (
        12.5,
        "provider:idempotent",
        "release",
        "j-1",
    )
    assert event.fields["outcome"] == "commit"
    assert event.fields["released_by"] == "deadline"
    assert event.fields["arrival"] == 7
