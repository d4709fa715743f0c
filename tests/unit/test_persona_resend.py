"""The resend persona without sockets: the Emails API's wire format over the idempotent kind."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_providers.app import ProviderApp, Reply, Request
from fake_providers.faults import FaultBoard
from fake_providers.models import Fault
from fake_providers.personas import persona_for
from fake_providers.personas.resend import email_uuid
from fake_providers.store import Store, external_id

JSON = {"content-type": "application/json"}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[ProviderApp]:
    store = Store(tmp_path / "resend.db", provider="resend")
    board = FaultBoard(hold_max_s=30.0)
    yield ProviderApp(kind="resend", name="resend", store=store, board=board)
    board.close()
    store.close()


def email(job: str = "j-0001", **extra: Any) -> dict[str, Any]:
    return {
        "from": "Acme <billing@example.com>",
        "to": ["customer@example.com"],
        "subject": "Your receipt",
        "html": "<p>Thanks</p>",
        "tags": [{"name": "job_id", "value": job}],
        **extra,
    }


def send(app: ProviderApp, body: Any, key: str | None = "k-1", **headers: str) -> Reply:
    h = {**JSON, **headers}
    if key is not None:
        h["idempotency-key"] = key
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return app.handle(Request("POST", "/emails", h, raw))


def error(reply: Reply) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(reply.body)
    assert set(doc) == {"statusCode", "name", "message"}
    assert doc["statusCode"] == reply.status
    return doc


def test_persona_maps_onto_idempotent_without_a_replay_header() -> None:
    persona = persona_for("resend")
    assert persona is not None
    assert (persona.kind, persona.replay_header) == ("idempotent", None)


def test_send_is_200_with_a_uuid_derived_from_the_effect(app: ProviderApp) -> None:
    reply = send(app, email())
    assert reply.status == 200
    email_id = json.loads(reply.body)["id"]
    (effect,) = app.store.effects()
    assert email_id == email_uuid(external_id("resend", effect["id"]))
    # The effect's external reference is the vendor's id, which is what a worker keeps.
    assert effect["external_id"] == email_id
    assert uuid.UUID(email_id).version == 4
    assert (effect["job_id"], effect["idempotency_key"]) == ("j-0001", "k-1")


def test_replay_is_the_same_bytes_one_effect_and_no_header(app: ProviderApp) -> None:
    first = send(app, email())
    again = send(app, email())
    assert (again.status, again.body, again.headers) == (200, first.body, ())
    assert len(app.store.effects()) == 1
    assert [a["committed"] for a in app.store.arrivals()] == [True, False]
    # No header says so on the wire, yet the provider's log knows it replayed.
    assert [a["replayed"] for a in app.store.arrivals()] == [False, True]


def test_same_key_other_payload_is_409_invalid_idempotent_request(app: ProviderApp) -> None:
    send(app, email())
    reply = send(app, email(subject="Another subject"))
    assert reply.status == 409
    assert error(reply)["name"] == "invalid_idempotent_request"
    assert len(app.store.effects()) == 1


def test_same_key_in_flight_is_409_concurrent_idempotent_requests(app: ProviderApp) -> None:
    fault_id = app.board.arm(Fault("hold_before_commit", key="k-1"))
    replies: list[Reply] = []
    t = threading.Thread(target=lambda: replies.append(send(app, email())))
    t.start()
    assert app.board.wait_held(fault_id, 10.0) is not None
    reply = send(app, email())
    assert reply.status == 409
    assert error(reply)["name"] == "concurrent_idempotent_requests"
    app.board.release(fault_id, "commit")
    t.join(10.0)
    assert replies[0].status == 200
    assert len(app.store.effects()) == 1


@pytest.mark.parametrize("key", [None, "x" * 257])
def test_no_usable_key_is_400_invalid_idempotency_key(app: ProviderApp, key: str | None) -> None:
    reply = send(app, email(), key=key)
    assert reply.status == 400
    assert error(reply)["name"] == "invalid_idempotency_key"
    assert app.store.effects() == []


def test_job_is_read_from_the_job_id_tag(app: ProviderApp) -> None:
    tags = [{"name": "category", "value": "receipt"}, {"name": "job_id", "value": "j-42"}]
    send(app, email(tags=tags))
    assert app.store.effects()[0]["job_id"] == "j-42"


@pytest.mark.parametrize(
    ("change", "status", "name"),
    [
        ({"to": None}, 422, "missing_required_field"),
        ({"subject": None}, 422, "missing_required_field"),
        ({"to": []}, 422, "validation_error"),
        ({"tags": [{"name": "category", "value": "x"}]}, 422, "validation_error"),
        ({"tags": "job_id=j-1"}, 422, "validation_error"),
    ],
)
def test_invalid_email_is_refused_in_resends_shape(
    app: ProviderApp, change: dict[str, Any], status: int, name: str
) -> None:
    body = {k: v for k, v in {**email(), **change}.items() if v is not None}
    reply = send(app, body)
    assert (reply.status, error(reply)["name"]) == (status, name)
    assert app.store.effects() == []


def test_not_json_is_400_validation_error(app: ProviderApp) -> None:
    reply = send(app, b"[1, 2]")
    assert (reply.status, error(reply)["name"]) == (400, "validation_error")


def test_retrieve_is_the_lookup_of_the_emails_job(app: ProviderApp) -> None:
    email_id = json.loads(send(app, email()).body)["id"]
    reply = app.handle(Request("GET", f"/emails/{email_id}"))
    assert reply.status == 200
    obj = json.loads(reply.body)
    assert (obj["object"], obj["id"], obj["last_event"]) == ("email", email_id, "delivered")
    assert obj["to"] == ["customer@example.com"]
    assert obj["from"] == "Acme <billing@example.com>"
    lookup = app.store.arrivals()[-1]
    assert (lookup["kind"], lookup["job_id"], lookup["idempotency_key"], lookup["status"]) == (
        "lookup",
        "j-0001",
        "k-1",
        200,
    )


def test_retrieve_unknown_is_404_not_found(app: ProviderApp) -> None:
    reply = app.handle(Request("GET", f"/emails/{uuid.uuid4()}"))
    assert (reply.status, error(reply)["name"]) == (404, "not_found")


def test_fail_lookup_is_a_5xx_application_error(app: ProviderApp) -> None:
    email_id = json.loads(send(app, email()).body)["id"]
    app.board.arm(Fault("fail_lookup", job="j-0001", status=503))
    reply = app.handle(Request("GET", f"/emails/{email_id}"))
    assert (reply.status, error(reply)["name"]) == (503, "application_error")
    assert app.store.arrivals()[-1]["fault"] == "fail_lookup"


def test_fail_before_commit_leaves_the_key_free(app: ProviderApp) -> None:
    app.board.arm(Fault("fail_before_commit", key="k-1", status=500))
    reply = send(app, email())
    assert (reply.status, error(reply)["name"]) == (500, "application_error")
    assert send(app, email()).status == 200
    assert len(app.store.effects()) == 1


@pytest.mark.parametrize(("state", "status"), [("expired", 401), ("changed", 403)])
def test_identity_faults_are_invalid_api_key(app: ProviderApp, state: str, status: int) -> None:
    app.identities.set("acct-1", state, now_acts_as="acct-9" if state == "changed" else None)
    reply = send(app, email(), **{"x-crashpoint-identity": "acct-1"})
    assert (reply.status, error(reply)["name"]) == (status, "invalid_api_key")
    assert app.store.effects() == []


def test_unknown_route_404_and_wrong_method_405(app: ProviderApp) -> None:
    assert error(app.handle(Request("POST", "/emails/batch", JSON, b"[]")))["name"] == "not_found"
    reply = app.handle(Request("GET", "/emails"))
    assert (reply.status, error(reply)["name"]) == (405, "method_not_allowed")
