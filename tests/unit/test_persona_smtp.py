"""The smtp persona without sockets: a message read into job, marker and fingerprint, and
written through the provider's own write path (store, faults, holds) into SMTP replies."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path

import pytest

from fake_providers.app import ProviderApp, Reply, Request
from fake_providers.control import NoFence
from fake_providers.faults import FaultBoard
from fake_providers.models import Fault
from fake_providers.personas import persona_for
from fake_providers.personas.base import Parsed
from fake_providers.personas.smtp import (
    METHOD,
    PATH,
    SmtpProblem,
    parse_message,
    reply_line,
    request_headers,
)
from fake_providers.store import Store

SENDER = "billing@example.com"
RCPTS = ["customer@example.com"]


@pytest.fixture
def app(tmp_path: Path) -> Iterator[ProviderApp]:
    store = Store(tmp_path / "mail.db", provider="mail")
    board = FaultBoard(hold_max_s=30.0)
    yield ProviderApp(kind="smtp", name="mail", store=store, board=board)
    board.close()
    store.close()


def message(
    job: str | None = "j-0001",
    *,
    message_id: str | None = "<receipt-j-0001@example.com>",
    date: str = "Fri, 04 Dec 2026 21:00:00 +0000",
    boundary: str | None = None,
    headers: dict[str, str] | None = None,
) -> bytes:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"], msg["Date"] = SENDER, RCPTS[0], "Receipt", date
    if job is not None:
        msg["X-Crashpoint-Job"] = job
    if message_id is not None:
        msg["Message-ID"] = message_id
    for name, value in (headers or {}).items():
        msg[name] = value
    msg.set_content("We charged 1.00 USD.")
    if boundary is not None:
        msg.add_alternative("<p>We charged 1.00 USD.</p>", subtype="html")
        msg.set_boundary(boundary)
    return bytes(msg)


def deliver(app: ProviderApp, raw: bytes) -> Reply:
    """What the SMTP listener does with a message at DATA, minus the socket."""
    req = Request(METHOD, PATH, request_headers(raw), raw)
    return app.write(req, PATH, parse_message(raw, mail_from=SENDER, rcpt_tos=RCPTS))


def parsed(raw: bytes) -> Parsed:
    p = parse_message(raw, mail_from=SENDER, rcpt_tos=RCPTS)
    assert isinstance(p, Parsed)
    return p


def test_the_persona_is_unqueryable_with_no_http_business_api(app: ProviderApp) -> None:
    persona = persona_for("smtp")
    assert persona is not None
    assert (persona.name, persona.kind, persona.replay_header) == ("smtp", "unqueryable", None)
    assert app.kind == "unqueryable"
    # Over HTTP only the control and oracle APIs answer: a send there is a problem doc.
    reply = app.handle(Request("POST", "/v1/sends", {"content-type": "application/json"}, b"{}"))
    assert reply.status == 404
    assert json.loads(reply.body)["status"] == 404


def test_the_job_comes_from_its_header_and_the_message_id_is_the_marker() -> None:
    p = parsed(message(headers={"X-Worker-Id": "w2"}))
    assert p.job_id == "j-0001"
    assert p.marker == "<receipt-j-0001@example.com>"
    assert p.key is None
    assert p.payload["from"] == SENDER
    assert p.payload["to"] == RCPTS
    assert p.payload["subject"] == "Receipt"
    assert "X-Worker-Id" not in json.dumps(p.payload)


def test_what_a_client_makes_up_per_send_is_not_in_the_fingerprint() -> None:
    first = parsed(message(boundary="===a==="))
    again = parsed(
        message(
            message_id="<another@example.com>",
            date="Sat, 05 Dec 2026 09:30:00 +0000",
            boundary="===b===",
            headers={"X-Worker-Id": "w9", "X-Fencing-Token": "7"},
        )
    )
    assert first.payload == again.payload
    other = parsed(message().replace(b"Subject: Receipt", b"Subject: Refund"))
    assert other.payload != first.payload


def test_a_message_without_the_job_header_is_refused_with_554() -> None:
    p = parse_message(message(job=None), mail_from=SENDER, rcpt_tos=RCPTS)
    assert isinstance(p, SmtpProblem)
    assert (p.reply, p.enhanced, p.status) == (554, "5.6.0", 554)
    assert "X-Crashpoint-Job" in p.detail


def test_the_attempt_headers_ride_in_the_message() -> None:
    raw = message(
        headers={"X-Worker-Id": "w1", "X-Fencing-Token": "3", "X-Crashpoint-Identity": "acct-1"}
    )
    assert request_headers(raw) == {
        "x-worker-id": "w1",
        "x-fencing-token": "3",
        "x-crashpoint-identity": "acct-1",
    }
    assert request_headers(message()) == {}


def test_an_accepted_message_is_an_effect_and_a_250(app: ProviderApp) -> None:
    reply = deliver(app, message(headers={"X-Worker-Id": "w1", "X-Fencing-Token": "2"}))
    assert reply.status == 250
    assert reply.body.startswith(b"250 2.0.0 OK: queued as rec_mail_000001")
    [effect] = app.store.effects()
    assert (effect["job_id"], effect["client_marker"]) == ("j-0001", "<receipt-j-0001@example.com>")
    assert effect["idempotency_key"] is None
    [arrival] = app.store.arrivals()
    assert (arrival["method"], arrival["path"], arrival["status"]) == (METHOD, PATH, 250)
    assert (arrival["worker_id"], arrival["fencing_token"], arrival["committed"]) == ("w1", "2", 1)


def test_the_same_message_again_is_a_second_effect(app: ProviderApp) -> None:
    """SMTP keeps no key: a Message-ID sent twice is two emails, as at a real relay."""
    assert deliver(app, message()).status == 250
    assert deliver(app, message()).status == 250
    effects = app.store.effects()
    assert [e["job_id"] for e in effects] == ["j-0001", "j-0001"]
    assert len({e["fingerprint"] for e in effects}) == 1


def test_fail_before_commit_is_a_451_and_commits_nothing(app: ProviderApp) -> None:
    app.board.arm(Fault("fail_before_commit", job="j-0001"))
    reply = deliver(app, message())
    assert reply.status == 451
    assert reply.body.startswith(b"451 4.3.0 injected failure before commit")
    assert app.store.effects() == []
    [arrival] = app.store.arrivals()
    assert (arrival["status"], arrival["committed"], arrival["fault"]) == (
        451,
        0,
        "fail_before_commit",
    )


def test_drop_after_commit_commits_and_sends_no_reply(app: ProviderApp) -> None:
    app.board.arm(Fault("drop_after_commit"))
    reply = deliver(app, message())
    assert reply.drop
    [effect] = app.store.effects()
    assert effect["job_id"] == "j-0001"
    [arrival] = app.store.arrivals()
    assert (arrival["status"], arrival["committed"]) == (None, 1)


@pytest.mark.parametrize(
    ("action", "committed"), [("hold_after_commit", True), ("hold_before_commit", False)]
)
def test_a_held_message_released_as_a_drop(
    app: ProviderApp, action: str, *, committed: bool
) -> None:
    """Held, then dropped: after the commit the message stays sent, before it nothing is."""
    fault_id = app.board.arm(Fault(action))
    out: list[Reply] = []
    t = threading.Thread(target=lambda: out.append(deliver(app, message())))
    t.start()
    held = app.board.wait_held(fault_id, timeout_s=10)
    assert held is not None
    assert held.committed is committed
    assert app.board.release(fault_id, "drop") == 1
    t.join(10)
    assert out[0].drop
    assert len(app.store.effects()) == int(committed)


def test_an_identity_refused_is_an_smtp_refusal(app: ProviderApp) -> None:
    app.identities.set("acct-1", "expired")
    reply = deliver(app, message(headers={"X-Crashpoint-Identity": "acct-1"}))
    assert reply.status == 535
    assert reply.body.startswith(b"535 5.7.8 ")
    assert app.store.effects() == []


def test_reply_lines_are_one_ascii_line() -> None:
    reply = reply_line(451, "4.3.0", "held for acct-\u00e9;\r\n 250 OK")
    assert reply.body == b"451 4.3.0 held for acct-?; 250 OK"
    assert reply.status == 451


def test_the_listeners_are_reported_by_health_and_wipe(app: ProviderApp) -> None:
    class Smtp:
        name = "smtp"
        url = "smtp://127.0.0.1:2525"
        closed = False

        def close(self) -> None:
            self.closed = True

    listener = Smtp()
    app.listeners.append(listener)
    app.control.fence = NoFence()
    secret = {"x-crashpoint-secret": "s"}
    app.secret = "s"
    health = json.loads(app.handle(Request("GET", "/_control/health", secret)).body)
    assert health["listeners"] == {"smtp": "smtp://127.0.0.1:2525"}
    wiped = json.loads(app.handle(Request("POST", "/_control/wipe", secret)).body)
    assert wiped["listeners"] == {"smtp": "smtp://127.0.0.1:2525"}
    app.close()
    assert listener.closed


def test_a_wipe_raises_both_fences_and_waits_for_each() -> None:
    """The HTTP server's fence and the SMTP listener's: every one is raised and waited
    for, even when an earlier one already failed to drain."""
    from fake_providers.smtp import Fences

    calls: list[str] = []

    class Fence:
        def __init__(self, name: str, shut: int, *, idle: bool) -> None:
            self.name, self.shut, self.idle = name, shut, idle
            self.url = f"http://{name}"

        def begin(self) -> int:
            calls.append(f"begin {self.name}")
            return self.shut

        def wait(self) -> bool:
            calls.append(f"wait {self.name}")
            return self.idle

    both = Fences(Fence("http", 2, idle=False), Fence("smtp", 3, idle=True))
    assert both.url == "http://http"
    assert both.begin() == 5
    assert both.wait() is False
    assert calls == ["begin http", "begin smtp", "wait http", "wait smtp"]
