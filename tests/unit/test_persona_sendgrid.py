"""The sendgrid persona without sockets: Mail Send's wire format over the unqueryable kind."""

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
from fake_providers.personas import persona_for
from fake_providers.personas.sendgrid import message_id
from fake_providers.store import Store, external_id

JSON = {"content-type": "application/json"}
SEND = "/v3/mail/send"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[ProviderApp]:
    store = Store(tmp_path / "sendgrid.db", provider="sendgrid")
    board = FaultBoard(hold_max_s=30.0)
    yield ProviderApp(kind="sendgrid", name="sendgrid", store=store, board=board)
    board.close()
    store.close()


def mail(job: str | None = "j-0001", marker: str | None = None, **extra: Any) -> dict[str, Any]:
    args = {k: v for k, v in (("job_id", job), ("client_marker", marker)) if v is not None}
    body: dict[str, Any] = {
        "personalizations": [{"to": [{"email": "to@example.com"}]}],
        "from": {"email": "from@example.com"},
        "subject": "Your receipt",
        "content": [{"type": "text/plain", "value": "Thanks"}],
        "custom_args": args,
    }
    body.update(extra)
    return body


def send(app: ProviderApp, body: Any, **headers: str) -> Reply:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return app.handle(Request("POST", SEND, {**JSON, **headers}, raw))


def errors(reply: Reply) -> list[dict[str, Any]]:
    doc = json.loads(reply.body)
    assert set(doc) == {"errors"}
    assert all(set(e) == {"message", "field", "help"} for e in doc["errors"])
    return list(doc["errors"])


def test_persona_maps_onto_unqueryable() -> None:
    persona = persona_for("sendgrid")
    assert persona is not None
    assert (persona.name, persona.kind, persona.replay_header) == (
        "sendgrid",
        "unqueryable",
        None,
    )


def test_send_is_202_empty_with_a_message_id_derived_from_the_effect(app: ProviderApp) -> None:
    reply = send(app, mail(marker="m-1"))
    assert (reply.status, reply.body) == (202, b"")
    (effect,) = app.store.effects()
    msg_id = dict(reply.headers)["X-Message-Id"]
    assert msg_id == message_id(external_id("sendgrid", effect["id"]))
    # The effect's external reference is the vendor's id, which is what a worker keeps.
    assert effect["external_id"] == msg_id
    assert len(msg_id) == 22
    assert (effect["job_id"], effect["client_marker"]) == ("j-0001", "m-1")
    (obj,) = app.store.objects(resource="message")
    assert obj["object_id"] == msg_id
    assert json.loads(obj["body"])["to_email"] == "to@example.com"


def test_sending_again_is_a_second_email(app: ProviderApp) -> None:
    first, second = send(app, mail()), send(app, mail())
    assert first.status == second.status == 202
    assert dict(first.headers)["X-Message-Id"] != dict(second.headers)["X-Message-Id"]
    assert [e["job_id"] for e in app.store.effects()] == ["j-0001", "j-0001"]


def test_job_from_the_first_personalization_and_marker_outside_the_fingerprint(
    app: ProviderApp,
) -> None:
    body = mail(job=None)
    body["personalizations"][0]["custom_args"] = {"job_id": "j-7", "client_marker": "m-a"}
    other = mail(job=None)
    other["personalizations"][0]["custom_args"] = {"job_id": "j-7", "client_marker": "m-b"}
    assert send(app, body).status == send(app, other).status == 202
    a, b = app.store.arrivals()
    assert (a["job_id"], a["client_marker"], b["client_marker"]) == ("j-7", "m-a", "m-b")
    # The marker names the attempt, not the email: it is left out of the fingerprint.
    assert a["fingerprint"] == b["fingerprint"]


def test_top_level_custom_args_win_over_the_personalization(app: ProviderApp) -> None:
    body = mail(job="j-top")
    body["personalizations"][0]["custom_args"] = {"job_id": "j-inner"}
    send(app, body)
    assert app.store.effects()[0]["job_id"] == "j-top"


def test_missing_job_id_is_400_naming_custom_args(app: ProviderApp) -> None:
    reply = send(app, mail(job=None))
    assert reply.status == 400
    (err,) = errors(reply)
    assert err["field"] == "custom_args"
    assert "custom_args.job_id" in err["message"]
    assert app.store.effects() == []
    assert app.store.arrivals()[0]["status"] == 400


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"personalizations": []}, "personalizations"),
        ({"personalizations": [{"to": []}]}, "personalizations.0.to"),
        ({"from": {"name": "no address"}}, "from.email"),
        ({"subject": ""}, "subject"),
        ({"content": []}, "content"),
        ({"custom_args": {"job_id": 7}}, "custom_args"),
    ],
)
def test_invalid_mail_is_400_naming_the_field(
    app: ProviderApp, change: dict[str, Any], field: str
) -> None:
    reply = send(app, {**mail(), **change})
    assert reply.status == 400
    assert errors(reply)[0]["field"] == field
    assert app.store.effects() == []


def test_a_template_needs_no_subject_or_content(app: ProviderApp) -> None:
    body = mail(template_id="d-123")
    del body["subject"], body["content"]
    assert send(app, body).status == 202


def test_not_json_is_400_and_wrong_type_415(app: ProviderApp) -> None:
    assert send(app, b"{not json").status == 400
    assert errors(send(app, b"{not json"))[0]["field"] is None
    reply = app.handle(Request("POST", SEND, {"content-type": "text/plain"}, b"{}"))
    assert reply.status == 415
    errors(reply)


@pytest.mark.parametrize(
    "target",
    ["/v3/messages?query=msg_id%3D%22x%22", "/v3/messages/download", "/v3/messages/unknown"],
)
def test_email_activity_is_refused_403(app: ProviderApp, target: str) -> None:
    reply = app.handle(Request("GET", target))
    assert reply.status == 403
    assert errors(reply)[0]["message"] == "authorization required"
    assert app.store.arrivals()[-1]["kind"] == "lookup"


def test_an_activity_lookup_by_message_id_is_attributed_to_its_job(app: ProviderApp) -> None:
    msg_id = dict(send(app, mail(marker="m-1")).headers)["X-Message-Id"]
    # Email Activity's msg_id is the X-Message-Id with a suffix.
    assert app.handle(Request("GET", f"/v3/messages/{msg_id}.filter0001")).status == 403
    lookup = app.store.arrivals()[-1]
    assert (lookup["kind"], lookup["job_id"], lookup["client_marker"], lookup["status"]) == (
        "lookup",
        "j-0001",
        "m-1",
        403,
    )


def test_injected_failure_is_a_5xx_in_sendgrids_envelope(app: ProviderApp) -> None:
    app.board.arm(Fault("fail_before_commit", job="j-0001", status=503))
    reply = send(app, mail())
    assert reply.status == 503
    (err,) = errors(reply)
    assert "injected failure" in err["help"]
    assert app.store.effects() == []
    assert send(app, mail()).status == 202


@pytest.mark.parametrize(("state", "status"), [("expired", 401), ("changed", 403)])
def test_identity_faults_are_401_and_403(app: ProviderApp, state: str, status: int) -> None:
    app.identities.set("acct-1", state, now_acts_as="acct-9" if state == "changed" else None)
    reply = send(app, mail(), **{"x-crashpoint-identity": "acct-1"})
    assert reply.status == status
    assert errors(reply)[0]["message"] in (
        "The provided authorization grant is invalid, expired, or revoked",
        "access forbidden",
    )
    assert app.store.effects() == []


def test_unknown_route_404_and_wrong_method_405(app: ProviderApp) -> None:
    assert app.handle(Request("POST", "/v3/marketing/contacts", JSON, b"{}")).status == 404
    reply = app.handle(Request("GET", SEND))
    assert reply.status == 405
    assert ("Allow", "POST") in reply.headers
    errors(reply)


def test_hold_after_commit_then_drop_keeps_the_effect(app: ProviderApp) -> None:
    fault_id = app.board.arm(Fault("hold_after_commit", job="j-0001"))
    replies: list[Reply] = []
    t = threading.Thread(target=lambda: replies.append(send(app, mail())))
    t.start()
    held = app.board.wait_held(fault_id, 10.0)
    assert held is not None
    assert held.committed
    app.board.release(fault_id, "drop")
    t.join(10.0)
    assert replies[0].drop
    assert len(app.store.effects()) == 1
