"""ProviderClient against a mocked transport (respx): requests sent, errors raised."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
import respx

from fake_providers import Fault, ProviderClient
from harness.contract.env import provider_env_var
from harness.contract.errors import ProviderError, RendezvousTimeout

URL = "http://127.0.0.1:9"

ARRIVAL = {
    "id": 1,
    "t_mono": 1.5,
    "t_wall": 1e9,
    "provider": "billing",
    "kind": "write",
    "method": "POST",
    "path": "/v1/effects",
    "job_id": "j-0001",
    "idempotency_key": "k",
    "client_marker": None,
    "fingerprint": "ab",
    "fencing_token": "3",
    "worker_id": "w-1",
    "peer_pid": 42,
    "status": 201,
    "committed": True,
    "replayed": False,
    "effect_id": 7,
    "fault": None,
    "added_by_a_newer_server": "ignored",
}
HELD = {
    "fault_id": "f-1",
    "action": "hold_before_commit",
    "arrival_id": 1,
    "job_id": "j-0001",
    "idempotency_key": "k",
    "client_marker": None,
    "committed": False,
    "effect_id": None,
    "t_mono": 2.0,
}


def _problem(status: int, detail: str) -> httpx.Response:
    return httpx.Response(status, json={"status": status, "detail": detail})


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=URL, assert_all_called=False) as router:
        yield router


@pytest.fixture
def client() -> Iterator[ProviderClient]:
    with ProviderClient(URL) as c:
        yield c


def test_arm_posts_the_fault(mock: respx.MockRouter, client: ProviderClient) -> None:
    route = mock.post("/_control/faults").mock(httpx.Response(201, json={"fault_id": "f-3"}))
    assert client.arm(Fault("fail_before_commit", job="j-1", times=2, status=502)) == "f-3"
    sent = json.loads(route.calls.last.request.content)
    assert sent == {
        "action": "fail_before_commit",
        "job": "j-1",
        "key": None,
        "marker": None,
        "times": 2,
        "status": 502,
        "delay_s": 0.0,
        "release_after_s": None,
        "release_outcome": "commit",
    }


def test_arrivals_parse_and_ignore_unknown_fields(
    mock: respx.MockRouter, client: ProviderClient
) -> None:
    mock.get("/_oracle/arrivals").mock(httpx.Response(200, json=[ARRIVAL]))
    [arrival] = client.arrivals()
    assert (arrival.job_id, arrival.committed, arrival.effect_id) == ("j-0001", True, 7)


def test_arrivals_after_sends_the_cursor(mock: respx.MockRouter, client: ProviderClient) -> None:
    route = mock.get("/_oracle/arrivals").mock(httpx.Response(200, json=[]))
    assert client.arrivals(after=5) == []
    assert route.calls.last.request.url.params["after"] == "5"


def test_wait_held_polls_until_held(mock: respx.MockRouter, client: ProviderClient) -> None:
    route = mock.get("/_control/faults/f-1/held").mock(
        side_effect=[_problem(408, "not yet"), httpx.Response(200, json=HELD)]
    )
    held = client.wait_held("f-1", timeout_s=30.0)
    assert held.arrival_id == 1
    assert route.call_count == 2


def test_wait_held_times_out_with_rendezvous_timeout(
    mock: respx.MockRouter, client: ProviderClient
) -> None:
    mock.get("/_control/faults/f-1/held").mock(_problem(408, "not yet"))
    with pytest.raises(RendezvousTimeout, match=r"held under fault f-1 .* within 0 s"):
        client.wait_held("f-1", timeout_s=0.0)


def test_wait_held_count_returns_every_held_request(
    mock: respx.MockRouter, client: ProviderClient
) -> None:
    second = {**HELD, "arrival_id": 2}
    route = mock.get("/_control/faults/f-1/held").mock(httpx.Response(200, json=[HELD, second]))
    held = client.wait_held_count("f-1", 2, timeout_s=5.0)
    assert [h.arrival_id for h in held] == [1, 2]
    assert route.calls.last.request.url.params["count"] == "2"


def test_release_sends_outcome(mock: respx.MockRouter, client: ProviderClient) -> None:
    route = mock.post("/_control/faults/f-1/release").mock(
        httpx.Response(200, json={"released": 1})
    )
    assert client.release("f-1", "drop", arrival_id=4) == 1
    assert json.loads(route.calls.last.request.content) == {"outcome": "drop", "arrival_id": 4}


def test_error_answers_raise_provider_error_with_detail(
    mock: respx.MockRouter, client: ProviderClient
) -> None:
    mock.post("/_control/faults/f-9/release").mock(_problem(404, "no armed fault 'f-9'"))
    with pytest.raises(ProviderError, match=r"answered 404: no armed fault 'f-9'"):
        client.release("f-9")


def test_connection_failure_says_what_to_check(
    mock: respx.MockRouter, client: ProviderClient
) -> None:
    mock.get("/_oracle/effects").mock(side_effect=httpx.ConnectError("refused"))
    with pytest.raises(ProviderError, match="is the provider running"):
        client.effects()


def test_reset_and_disarm(mock: respx.MockRouter, client: ProviderClient) -> None:
    mock.post("/_control/reset").mock(httpx.Response(200, json={"released": 2}))
    disarm = mock.delete("/_control/faults").mock(httpx.Response(200, json={"disarmed": True}))
    assert client.reset() == 2
    client.disarm_all()
    assert disarm.called


@pytest.mark.parametrize(
    ("name", "var"),
    [
        ("billing", "CRASHPOINT_PROVIDER_BILLING_URL"),
        ("email-out", "CRASHPOINT_PROVIDER_EMAIL_OUT_URL"),
        ("crm.v2", "CRASHPOINT_PROVIDER_CRM_V2_URL"),
    ],
)
def test_env_var_name(name: str, var: str) -> None:
    assert provider_env_var(name) == var


def test_every_call_carries_the_secret(mock: respx.MockRouter) -> None:
    health = mock.get("/_control/health").mock(httpx.Response(200, json={"ok": True}))
    arrivals = mock.get("/_oracle/arrivals").mock(httpx.Response(200, json=[]))
    with ProviderClient(URL, secret="s-1") as c:
        c.health()
        c.arrivals()
    for route in (health, arrivals):
        assert route.calls.last.request.headers["X-Crashpoint-Secret"] == "s-1"


def test_no_secret_sends_no_header(mock: respx.MockRouter, client: ProviderClient) -> None:
    route = mock.get("/_control/health").mock(httpx.Response(200, json={"ok": True}))
    client.health()
    assert "X-Crashpoint-Secret" not in route.calls.last.request.headers


def test_denied_arrivals_parse(mock: respx.MockRouter, client: ProviderClient) -> None:
    denied = {**ARRIVAL, "kind": "control_denied", "path": "/_control/reset", "status": 403}
    mock.get("/_oracle/arrivals").mock(httpx.Response(200, json=[denied]))
    [arrival] = client.arrivals()
    assert (arrival.kind, arrival.path, arrival.status) == (
        "control_denied",
        "/_control/reset",
        403,
    )
