"""Python's own `smtplib`, unpatched, against an smtp provider (aiosmtpd on its own port).

What happened is read from the provider's ground truth (arrivals and effects): a message
the provider committed while its client saw the connection reset, or time out, is the
unknown outcome an unqueryable provider leaves a worker with: review, never a resend.
"""

from __future__ import annotations

import os
import smtplib
import threading
from collections.abc import Iterator
from email.message import EmailMessage
from urllib.parse import urlsplit

import pytest

from fake_providers import Fault, ProviderProcess, start_provider

pytestmark = pytest.mark.process

JOB = "j-0001"
MESSAGE_ID = "<receipt-j-0001@billing.example.com>"


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProviderProcess]:
    state = tmp_path_factory.mktemp("smtp") / "mail.db"
    # As a pool starts it: a wipe moves both ports, so each test also proves the move.
    with start_provider("smtp", state_path=state, name="mail", new_port_on_wipe=True) as p:
        yield p


@pytest.fixture
def p(provider: ProviderProcess) -> ProviderProcess:
    provider.wipe()
    return provider


def message(job: str = JOB, **headers: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "billing@example.com"
    msg["To"] = "customer@example.com"
    msg["Subject"] = f"Your receipt for {job}"
    msg["Message-ID"] = MESSAGE_ID
    msg["X-Crashpoint-Job"] = job
    for name, value in headers.items():
        msg[name] = value
    msg.set_content("We charged 1.00 USD.")
    return msg


def send(p: ProviderProcess, msg: EmailMessage, *, timeout_s: float = 5.0) -> None:
    """How a worker sends: the address from its environment, nothing else."""
    url = urlsplit(p.env()["CRASHPOINT_PROVIDER_MAIL_URL"])
    assert url.scheme == "smtp"
    assert url.hostname == "127.0.0.1"
    with smtplib.SMTP(url.hostname, url.port, timeout=timeout_s) as smtp:
        refused = smtp.send_message(msg)
        assert refused == {}


def test_a_delivery_is_an_effect_keyed_by_its_message_id(p: ProviderProcess) -> None:
    send(p, message(**{"X-Worker-Id": "w1", "X-Fencing-Token": "4"}))
    [effect] = p.client.effects()
    assert (effect.job_id, effect.client_marker, effect.idempotency_key) == (JOB, MESSAGE_ID, None)
    assert effect.external_id == "rec_mail_000001"
    [arrival] = p.client.arrivals()
    assert (arrival.kind, arrival.method, arrival.path) == ("write", "SMTP", "DATA")
    assert (arrival.status, arrival.committed) == (250, True)
    assert (arrival.worker_id, arrival.fencing_token) == ("w1", "4")
    # This test process sent it: the peer pid is resolved as for an HTTP write.
    assert arrival.peer_pid == os.getpid()


def test_a_reply_dropped_after_commit_is_unknown_to_smtplib(p: ProviderProcess) -> None:
    p.client.arm(Fault("drop_after_commit", job=JOB))
    with pytest.raises(smtplib.SMTPServerDisconnected):
        send(p, message())
    # The client saw no reply; the provider holds the message all the same.
    [effect] = p.client.effects()
    assert effect.job_id == JOB
    [arrival] = p.client.arrivals()
    assert (arrival.status, arrival.committed, arrival.fault) == (None, True, "drop_after_commit")


def test_a_held_message_commits_after_its_client_is_gone(p: ProviderProcess) -> None:
    """hold_after_commit + drop: the rendezvous a kill at the provider uses."""
    fault_id = p.client.arm(Fault("hold_after_commit", job=JOB))
    errors: list[BaseException] = []

    def client() -> None:
        try:
            send(p, message())
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=client, daemon=True)
    t.start()
    held = p.client.wait_held(fault_id, timeout_s=10)
    assert held.committed
    assert held.job_id == JOB
    assert p.client.release(fault_id, "drop") == 1
    t.join(10)
    assert not t.is_alive()
    assert [type(e) for e in errors] == [smtplib.SMTPServerDisconnected]
    assert len(p.client.effects()) == 1


def test_a_hold_before_commit_dropped_sends_nothing(p: ProviderProcess) -> None:
    fault_id = p.client.arm(Fault("hold_before_commit", job=JOB))
    errors: list[BaseException] = []
    t = threading.Thread(target=lambda: _catch(errors, p), daemon=True)
    t.start()
    held = p.client.wait_held(fault_id, timeout_s=10)
    assert not held.committed
    p.client.release(fault_id, "drop")
    t.join(10)
    assert [type(e) for e in errors] == [smtplib.SMTPServerDisconnected]
    assert p.client.effects() == []


def _catch(errors: list[BaseException], p: ProviderProcess) -> None:
    try:
        send(p, message())
    except BaseException as exc:
        errors.append(exc)


def test_a_failure_before_commit_is_a_451_smtplib_raises(p: ProviderProcess) -> None:
    p.client.arm(Fault("fail_before_commit", job=JOB))
    with pytest.raises(smtplib.SMTPResponseException) as caught:
        send(p, message())
    assert caught.value.smtp_code == 451
    assert caught.value.smtp_error.startswith(b"4.3.0 ")
    assert p.client.effects() == []
    # Settled: told in a reply it could read, the worker may send again, once.
    send(p, message())
    assert [a.status for a in p.client.arrivals()] == [451, 250]
    assert len(p.client.effects()) == 1


def test_a_reply_delayed_past_the_clients_timeout_is_unknown(p: ProviderProcess) -> None:
    p.client.arm(Fault("delay_response", job=JOB, delay_s=2.0))
    with pytest.raises(smtplib.SMTPServerDisconnected, match="timed out"):
        send(p, message(), timeout_s=0.3)
    [effect] = p.client.effects()
    assert effect.job_id == JOB


def test_a_message_without_its_job_is_refused(p: ProviderProcess) -> None:
    msg = message()
    del msg["X-Crashpoint-Job"]
    with pytest.raises(smtplib.SMTPDataError) as caught:
        send(p, msg)
    assert caught.value.smtp_code == 554
    assert p.client.effects() == []
    assert [a.status for a in p.client.arrivals()] == [554]


def test_a_wipe_moves_the_smtp_port_and_cuts_its_connections(
    provider: ProviderProcess,
) -> None:
    provider.wipe()
    before = provider.worker_url
    url = urlsplit(before)
    smtp = smtplib.SMTP(url.hostname, url.port, timeout=5)
    try:
        smtp.ehlo()
        provider.wipe()
        assert provider.worker_url != before
        # The connection of before is cut: nothing sent on it reaches the store.
        with pytest.raises(smtplib.SMTPServerDisconnected):
            smtp.send_message(message())
    finally:
        smtp.close()
    with pytest.raises(ConnectionRefusedError):
        smtplib.SMTP(url.hostname, url.port, timeout=2).close()
    assert provider.client.arrivals() == []
    send(provider, message())
    assert len(provider.client.effects()) == 1
