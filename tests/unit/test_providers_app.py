"""Request handling without sockets: routes, problem+json, the three kinds, and faults."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_providers.app import ProviderApp, Reply, Request
from fake_providers.faults import FaultBoard
from fake_providers.models import Fault
from fake_providers.problems import PROBLEM_TYPE
from fake_providers.store import Store

JSON = {"content-type": "application/json"}


class Sleeps:
    """Records requested delays instead of sleeping."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, s: float) -> None:
        self.calls.append(s)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def _app(tmp_path: Path, kind: str, sleeps: Sleeps) -> Iterator[ProviderApp]:
    store = Store(tmp_path / f"{kind}.db", provider=kind)
    board = FaultBoard(hold_max_s=30.0)
    yield ProviderApp(kind=kind, name=kind, store=store, board=board, sleep=sleeps)
    board.close()
    store.close()


@pytest.fixture
def idem(tmp_path: Path, sleeps: Sleeps) -> Iterator[ProviderApp]:
    yield from _app(tmp_path, "idempotent", sleeps)


@pytest.fixture
def plain(tmp_path: Path, sleeps: Sleeps) -> Iterator[ProviderApp]:
    yield from _app(tmp_path, "plain", sleeps)


@pytest.fixture
def unqueryable(tmp_path: Path, sleeps: Sleeps) -> Iterator[ProviderApp]:
    yield from _app(tmp_path, "unqueryable", sleeps)


def post(app: ProviderApp, body: Any, *, key: str | None = None, **headers: str) -> Reply:
    h = dict(JSON)
    if key is not None:
        h["idempotency-key"] = key
    h.update(headers)
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return app.handle(Request("POST", app.write_path, h, raw))


def get(app: ProviderApp, target: str) -> Reply:
    return app.handle(Request("GET", target))


def problem(reply: Reply) -> dict[str, Any]:
    assert reply.content_type == PROBLEM_TYPE
    doc: dict[str, Any] = json.loads(reply.body)
    assert doc["status"] == reply.status
    assert set(doc) >= {"type", "title", "status", "detail"}
    return doc


# -- problem+json for every bad request -------------------------------------------------


def test_unknown_route_is_404(idem: ProviderApp) -> None:
    assert "no route" in problem(get(idem, "/v1/nope"))["detail"]
    assert get(idem, "/v1/nope").status == 404


def test_wrong_method_is_405_and_names_the_allowed_ones(idem: ProviderApp) -> None:
    reply = idem.handle(Request("DELETE", "/v1/effects"))
    assert reply.status == 405
    assert "POST, GET" in problem(reply)["detail"]


def test_wrong_content_type_is_415(idem: ProviderApp) -> None:
    reply = post(idem, b"job_id=j-1", key="k", **{"content-type": "text/plain"})
    assert reply.status == 415
    assert "text/plain" in problem(reply)["detail"]


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b""])
def test_body_that_is_not_a_json_object_is_400(idem: ProviderApp, raw: bytes) -> None:
    reply = post(idem, raw, key="k")
    assert reply.status == 400
    problem(reply)


def test_missing_idempotency_key_is_400(idem: ProviderApp) -> None:
    reply = post(idem, {"job_id": "j-1"})
    assert reply.status == 400
    assert "Idempotency-Key" in problem(reply)["detail"]
    assert idem.store.effects() == []


def test_plain_without_marker_is_422(plain: ProviderApp) -> None:
    reply = post(plain, {"job_id": "j-1"})
    assert reply.status == 422
    assert "client_marker" in problem(reply)["detail"]


def test_bad_requests_are_still_recorded_as_arrivals(idem: ProviderApp) -> None:
    post(idem, {"job_id": "j-1"})
    [arrival] = idem.store.arrivals()
    assert (arrival["job_id"], arrival["status"], arrival["committed"]) == ("j-1", 400, False)


def test_arrivals_page_after_an_id(idem: ProviderApp) -> None:
    for key in ("a", "b", "c"):
        post(idem, {"job_id": "j-1"}, key=key)
    page = json.loads(get(idem, "/_oracle/arrivals?after=1").body)
    assert [a["idempotency_key"] for a in page] == ["b", "c"]
    assert get(idem, "/_oracle/arrivals?after=-1").status == 400


def test_an_internal_error_is_still_problem_json(idem: ProviderApp) -> None:
    def broken(*, after: int = 0) -> list[dict[str, Any]]:
        raise RuntimeError("disk on fire")

    idem.store.arrivals = broken  # type: ignore[method-assign]
    reply = get(idem, "/_oracle/arrivals")
    assert reply.status == 500
    assert "disk on fire" in problem(reply)["detail"]


# -- idempotent -------------------------------------------------------------------------


def test_new_key_commits_once_and_replays_byte_identical(idem: ProviderApp) -> None:
    first = post(idem, {"job_id": "j-1", "amount": 3}, key="k")
    again = post(idem, {"amount": 3, "job_id": "j-1"}, key="k")
    assert first.status == again.status == 201
    assert again.body == first.body
    assert ("Idempotent-Replayed", "true") in again.headers
    assert ("Idempotent-Replayed", "true") not in first.headers
    assert len(idem.store.effects()) == 1
    arrivals = idem.store.arrivals()
    assert [a["replayed"] for a in arrivals] == [False, True]
    assert [a["committed"] for a in arrivals] == [True, False]


def test_same_key_different_payload_is_422(idem: ProviderApp) -> None:
    post(idem, {"job_id": "j-1", "amount": 3}, key="k")
    reply = post(idem, {"job_id": "j-1", "amount": 4}, key="k")
    assert reply.status == 422
    assert "different payload" in problem(reply)["detail"]
    assert len(idem.store.effects()) == 1


def test_stored_validation_error_is_replayed(idem: ProviderApp) -> None:
    first = post(idem, {"amount": 3}, key="k")
    again = post(idem, {"amount": 3}, key="k")
    assert first.status == again.status == 422
    assert again.body == first.body
    assert again.content_type == PROBLEM_TYPE
    assert ("Idempotent-Replayed", "true") in again.headers
    assert idem.store.effects() == []


def test_lookup_by_key(idem: ProviderApp) -> None:
    assert get(idem, "/v1/effects?idempotency_key=k").status == 404
    created = post(idem, {"job_id": "j-1"}, key="k")
    reply = get(idem, "/v1/effects?idempotency_key=k")
    doc = json.loads(reply.body)
    assert reply.status == 200
    assert doc == {
        "state": "completed",
        "response": {"status": 201, "body": json.loads(created.body)},
    }
    lookup = idem.store.arrivals()[-1]
    assert (lookup["kind"], lookup["job_id"], lookup["status"]) == ("lookup", "j-1", 200)


def test_lookup_without_key_is_400(idem: ProviderApp) -> None:
    assert problem(get(idem, "/v1/effects"))["status"] == 400


def test_headers_are_recorded(idem: ProviderApp) -> None:
    post(idem, {"job_id": "j-1"}, key="k", **{"x-fencing-token": "7", "x-worker-id": "w-2"})
    [arrival] = idem.store.arrivals()
    assert (arrival["fencing_token"], arrival["worker_id"]) == ("7", "w-2")


# -- plain and unqueryable --------------------------------------------------------------


def test_plain_commits_every_post(plain: ProviderApp) -> None:
    for marker in ("m-1", "m-2", "m-1"):
        assert post(plain, {"job_id": "j-1", "client_marker": marker}).status == 201
    assert len(plain.store.effects()) == 3
    found = json.loads(get(plain, "/v1/sends?client_marker=m-1").body)
    assert [e["client_marker"] for e in found] == ["m-1", "m-1"]
    assert json.loads(get(plain, "/v1/sends?client_marker=m-9").body) == []


def test_unqueryable_lookups_are_501_and_recorded(unqueryable: ProviderApp) -> None:
    assert post(unqueryable, {"job_id": "j-1", "client_marker": "m"}).status == 201
    reply = get(unqueryable, "/v1/sends?client_marker=m")
    assert reply.status == 501
    problem(reply)
    assert unqueryable.store.arrivals()[-1]["status"] == 501


# -- faults -----------------------------------------------------------------------------


def test_fail_before_commit_n_times_then_success(idem: ProviderApp) -> None:
    idem.board.arm(Fault("fail_before_commit", times=2, status=502))
    statuses = [post(idem, {"job_id": "j-1"}, key="k").status for _ in range(3)]
    assert statuses == [502, 502, 201]
    assert len(idem.store.effects()) == 1
    assert [a["fault"] for a in idem.store.arrivals()] == [
        "fail_before_commit",
        "fail_before_commit",
        None,
    ]


def test_faults_match_only_their_job(plain: ProviderApp) -> None:
    plain.board.arm(Fault("fail_before_commit", job="j-2"))
    assert post(plain, {"job_id": "j-1", "client_marker": "a"}).status == 201
    assert post(plain, {"job_id": "j-2", "client_marker": "b"}).status == 503
    assert post(plain, {"job_id": "j-2", "client_marker": "c"}).status == 201


def test_drop_after_commit_commits_and_sends_nothing(idem: ProviderApp) -> None:
    idem.board.arm(Fault("drop_after_commit"))
    assert post(idem, {"job_id": "j-1"}, key="k").drop
    [arrival] = idem.store.arrivals()
    assert (arrival["committed"], arrival["status"], arrival["fault"]) == (
        True,
        None,
        "drop_after_commit",
    )
    # The key completed, so the retry replays the response the client never saw.
    retry = post(idem, {"job_id": "j-1"}, key="k")
    assert retry.status == 201
    assert ("Idempotent-Replayed", "true") in retry.headers


def test_delay_response_sleeps_before_answering(plain: ProviderApp, sleeps: Sleeps) -> None:
    plain.board.arm(Fault("delay_response", delay_s=0.25))
    assert post(plain, {"job_id": "j-1", "client_marker": "m"}).status == 201
    assert sleeps.calls == [0.25]


def test_fail_lookup_then_answer(plain: ProviderApp) -> None:
    plain.board.arm(Fault("fail_lookup", marker="m", times=2))
    statuses = [get(plain, "/v1/sends?client_marker=m").status for _ in range(3)]
    assert statuses == [503, 503, 200]


def test_fail_lookup_matches_the_job_of_the_marker(plain: ProviderApp) -> None:
    post(plain, {"job_id": "j-1", "client_marker": "m-1"})
    post(plain, {"job_id": "j-2", "client_marker": "m-2"})
    plain.board.arm(Fault("fail_lookup", job="j-2"))
    assert get(plain, "/v1/sends?client_marker=m-1").status == 200
    assert get(plain, "/v1/sends?client_marker=m-2").status == 503
    lookups = [a for a in plain.store.arrivals() if a["kind"] == "lookup"]
    assert [a["job_id"] for a in lookups] == ["j-1", "j-2"]


def test_hold_before_commit_then_drop_leaves_no_effect(idem: ProviderApp) -> None:
    fault_id = idem.board.arm(Fault("hold_before_commit", key="k"))
    replies: list[Reply] = []
    t = threading.Thread(target=lambda: replies.append(post(idem, {"job_id": "j-1"}, key="k")))
    t.start()
    held = idem.board.wait_held(fault_id, 10.0)
    assert held is not None
    assert (held.job_id, held.committed) == ("j-1", False)
    assert post(idem, {"job_id": "j-1"}, key="k").status == 409
    assert idem.board.release(fault_id, "drop") == 1
    t.join(10.0)
    assert replies[0].drop
    assert idem.store.effects() == []
    # The dropped request never executed, so its key is free for the retry.
    assert post(idem, {"job_id": "j-1"}, key="k").status == 201


def test_hold_after_commit_then_respond(plain: ProviderApp) -> None:
    fault_id = plain.board.arm(Fault("hold_after_commit"))
    replies: list[Reply] = []
    body = {"job_id": "j-1", "client_marker": "m"}
    t = threading.Thread(target=lambda: replies.append(post(plain, body)))
    t.start()
    held = plain.board.wait_held(fault_id, 10.0)
    assert held is not None
    assert held.committed
    assert held.effect_id == plain.store.effects()[0]["id"]
    plain.board.release(fault_id, "commit")
    t.join(10.0)
    assert replies[0].status == 201


def test_release_without_hold_is_409(idem: ProviderApp) -> None:
    fault_id = idem.board.arm(Fault("hold_before_commit"))
    reply = idem.handle(
        Request("POST", f"/_control/faults/{fault_id}/release", JSON, b'{"outcome":"drop"}')
    )
    assert reply.status == 409
    assert "wait_held" in problem(reply)["detail"]


def test_bad_fault_is_422_naming_the_value(idem: ProviderApp) -> None:
    reply = idem.handle(Request("POST", "/_control/faults", JSON, b'{"action":"explode"}'))
    assert reply.status == 422
    assert "'explode'" in problem(reply)["detail"]


def test_wait_on_unknown_fault_is_404(idem: ProviderApp) -> None:
    reply = get(idem, "/_control/faults/f-99/held?timeout_s=0")
    assert reply.status == 404
    problem(reply)


def test_wait_times_out_with_408(idem: ProviderApp) -> None:
    fault_id = idem.board.arm(Fault("hold_after_commit"))
    assert get(idem, f"/_control/faults/{fault_id}/held?timeout_s=0").status == 408


def control(app: ProviderApp, method: str, path: str, body: Any = None) -> Reply:
    raw = b"" if body is None else json.dumps(body).encode()
    return app.handle(Request(method, path, dict(JSON), raw))


def test_the_key_ttl_is_a_setting_of_the_running_provider(tmp_path: Path) -> None:
    now = [1000.0]
    store = Store(tmp_path / "p.db", provider="idempotent", wall=lambda: now[0])
    app = ProviderApp(kind="idempotent", name="svc", store=store)
    assert json.loads(control(app, "GET", "/_control/settings").body) == {"key_ttl_s": 86400.0}
    reply = control(app, "POST", "/_control/settings", {"key_ttl_s": 5})
    assert (reply.status, json.loads(reply.body)) == (200, {"key_ttl_s": 5.0})
    assert post(app, {"job_id": "j-1"}, key="k1").status == 201
    now[0] += 4.0
    assert ("Idempotent-Replayed", "true") in post(app, {"job_id": "j-1"}, key="k1").headers
    now[0] += 2.0
    # Forgotten: the same key is a new request, and the lookup knows it no more.
    fresh = post(app, {"job_id": "j-1"}, key="k1")
    assert (fresh.status, ("Idempotent-Replayed", "true") in fresh.headers) == (201, False)
    assert len(store.effects()) == 2
    store.close()


@pytest.mark.parametrize(
    "body",
    [
        {"key_ttl_s": 0},
        {"key_ttl_s": -1},
        {"key_ttl_s": "5"},
        {"key_ttl_s": True},
        {"key_ttl_s": None},
        {"key_ttl_s": 10**400},
        {"x": 1},
    ],
)
def test_a_bad_setting_is_refused_and_changes_nothing(idem: ProviderApp, body: Any) -> None:
    reply = control(idem, "POST", "/_control/settings", body)
    assert reply.status == 422
    assert idem.store.key_ttl_s == 86400.0
