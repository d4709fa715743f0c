"""The unpatched `sendgrid` Python SDK against a sendgrid persona provider.

Every assertion about what happened is made on the provider's ground truth (arrivals and
effects), not only on what the SDK returned: the SDK (python_http_client over urllib)
never retries, has no timeout unless the call passes one, and hands connection errors
through raw, so a worker must treat ``ConnectionResetError`` and ``TimeoutError`` as
"unknown, and unqueryable": review, never a resend.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sendgrid
from python_http_client import exceptions as sg_errors
from sendgrid.helpers.mail import CustomArg, Mail

from fake_providers import Fault, ProviderProcess, start_provider
from fake_providers.personas.sendgrid import message_id
from fake_providers.store import external_id

pytestmark = pytest.mark.process

JOB = "j-0001"


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProviderProcess]:
    state = tmp_path_factory.mktemp("sendgrid") / "sendgrid.db"
    with start_provider("sendgrid", state_path=state) as p:
        yield p


@pytest.fixture
def p(provider: ProviderProcess) -> ProviderProcess:
    provider.wipe()
    return provider


def client(p: ProviderProcess) -> sendgrid.SendGridAPIClient:
    # The SDK's documented base-URL setting: the `host` argument.
    return sendgrid.SendGridAPIClient("SG.crashpoint-test", host=p.url)


def mail(job: str = JOB, marker: str | None = None) -> dict[str, Any]:
    m = Mail(
        from_email="billing@example.com",
        to_emails="customer@example.com",
        subject="Your receipt",
        html_content="<p>Thanks</p>",
    )
    m.custom_arg = CustomArg("job_id", job)
    if marker is not None:
        m.custom_arg = CustomArg("client_marker", marker)
    body: dict[str, Any] = m.get()
    return body


def post(p: ProviderProcess, *, timeout: float = 5.0, **headers: str) -> Any:
    """A send with a bounded wait: ``SendGridAPIClient.send`` has no timeout at all."""
    return client(p).client.mail.send.post(
        request_body=mail(), timeout=timeout, request_headers=headers or None
    )


def in_background(fn: Callable[[], Any]) -> Callable[[], BaseException | None]:
    """Run ``fn`` in a thread; the returned join gives the exception it raised."""
    box: list[BaseException | None] = [None]

    def run() -> None:
        try:
            fn()
        except BaseException as exc:
            box[0] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def join() -> BaseException | None:
        t.join(10.0)
        assert not t.is_alive()
        return box[0]

    return join


def writes(p: ProviderProcess) -> list[Any]:
    return [a for a in p.client.arrivals() if a.kind == "write"]


def test_send_and_send_again_are_two_emails(p: ProviderProcess) -> None:
    sg = client(p)
    first = sg.send(mail(marker="m-1"))
    second = sg.send(mail(marker="m-2"))
    assert (first.status_code, first.body, second.status_code) == (202, b"", 202)
    effects = p.client.effects()
    assert [e.job_id for e in effects] == [JOB, JOB]
    assert [e.client_marker for e in effects] == ["m-1", "m-2"]
    ids = [first.headers["X-Message-Id"], second.headers["X-Message-Id"]]
    # The effect's external reference is the message id the worker was given.
    assert ids == [e.external_id for e in effects]
    assert ids == [message_id(external_id("sendgrid", e.id)) for e in effects]
    # No idempotency: one fingerprint (the marker is left out of it), two effects.
    assert effects[0].fingerprint == effects[1].fingerprint


def test_there_is_no_lookup_only_403(p: ProviderProcess) -> None:
    sg = client(p)
    msg_id = sg.send(mail()).headers["X-Message-Id"]
    with pytest.raises(sg_errors.ForbiddenError) as by_id:
        sg.client.messages._(msg_id).get()
    with pytest.raises(sg_errors.ForbiddenError) as by_query:
        sg.client.messages.get(query_params={"query": f'msg_id LIKE "{msg_id}%"', "limit": 1})
    for err in (by_id.value, by_query.value):
        assert err.to_dict["errors"][0]["message"] == "authorization required"
    lookups = [a for a in p.client.arrivals() if a.kind == "lookup"]
    assert [(a.job_id, a.status) for a in lookups] == [(JOB, 403), (None, 403)]


def test_a_bad_mail_is_bad_request_naming_the_field(p: ProviderProcess) -> None:
    body = mail()
    del body["custom_args"]
    with pytest.raises(sg_errors.BadRequestsError) as err:
        client(p).send(body)
    assert err.value.to_dict["errors"][0]["field"] == "custom_args"
    assert p.client.effects() == []


@pytest.mark.parametrize(
    ("status", "error"),
    [(500, sg_errors.InternalServerError), (503, sg_errors.ServiceUnavailableError)],
)
def test_fail_before_commit_is_the_sdks_5xx_error_and_is_not_retried(
    p: ProviderProcess, status: int, error: type[Exception]
) -> None:
    p.client.arm(Fault("fail_before_commit", job=JOB, status=status))
    with pytest.raises(error) as err:
        client(p).send(mail())
    assert err.value.status_code == status  # type: ignore[attr-defined]
    assert "injected failure" in err.value.to_dict["errors"][0]["help"]  # type: ignore[attr-defined]
    # The SDK made one attempt: no retry behind the worker's back.
    assert [(a.status, a.fault) for a in writes(p)] == [(status, "fail_before_commit")]
    assert p.client.effects() == []


@pytest.mark.parametrize("action", ["hold_before_commit", "hold_after_commit"])
def test_a_dropped_hold_is_a_raw_connection_reset(p: ProviderProcess, action: str) -> None:
    fault_id = p.client.arm(Fault(action, job=JOB))
    join = in_background(lambda: post(p))
    p.client.wait_held(fault_id, timeout_s=10)
    p.client.release(fault_id, "drop")
    # Not an HTTPError: urllib's own error, whether or not the email went out.
    assert isinstance(join(), ConnectionResetError)
    committed = action == "hold_after_commit"
    assert len(p.client.effects()) == (1 if committed else 0)
    assert [(a.committed, a.status) for a in writes(p)] == [(committed, None)]


def test_drop_after_commit_is_a_connection_reset_with_the_email_sent(p: ProviderProcess) -> None:
    p.client.arm(Fault("drop_after_commit", job=JOB))
    with pytest.raises(ConnectionResetError):
        post(p)
    assert len(p.client.effects()) == 1
    assert len(writes(p)) == 1


def test_a_delay_past_the_calls_timeout_is_a_timeout_with_the_email_sent(
    p: ProviderProcess,
) -> None:
    p.client.arm(Fault("delay_response", job=JOB, delay_s=1.0))
    with pytest.raises(TimeoutError):
        post(p, timeout=0.3)
    assert len(p.client.effects()) == 1
    assert len(writes(p)) == 1


def test_fail_lookup_is_service_unavailable(p: ProviderProcess) -> None:
    p.client.arm(Fault("fail_lookup", status=503))
    with pytest.raises(sg_errors.ServiceUnavailableError):
        client(p).client.messages.get(query_params={"query": "x"})
    (lookup,) = [a for a in p.client.arrivals() if a.kind == "lookup"]
    assert (lookup.status, lookup.fault) == (503, "fail_lookup")


@pytest.mark.parametrize(
    ("state", "error"),
    [("expired", sg_errors.UnauthorizedError), ("changed", sg_errors.ForbiddenError)],
)
def test_identity_faults_are_unauthorized_and_forbidden(
    p: ProviderProcess, state: str, error: type[Exception]
) -> None:
    p.client.set_identity("acct-1", state, now_acts_as="acct-9" if state == "changed" else None)
    with pytest.raises(error) as err:
        post(p, **{"X-Crashpoint-Identity": "acct-1"})
    doc = json.loads(err.value.body)  # type: ignore[attr-defined]
    assert "acct-1" in doc["errors"][0]["help"]
    assert p.client.effects() == []
    assert [a.identity for a in writes(p)] == ["acct-1"]
