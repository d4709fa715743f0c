"""The Stripe persona without sockets: form decoding, objects, keys, lookups and errors."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from fake_providers.app import ProviderApp, Reply, Request
from fake_providers.faults import FaultBoard
from fake_providers.models import Fault
from fake_providers.personas.stripe_form import StripeProblem, decode_form, parse_query
from fake_providers.store import Store

FORM = "application/x-www-form-urlencoded"
PI_BODY = "amount=1000&currency=usd&confirm=true&metadata[job_id]=j-0001"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[ProviderApp]:
    store = Store(tmp_path / "stripe.db", provider="stripe")
    board = FaultBoard(hold_max_s=30.0)
    yield ProviderApp(kind="stripe", name="stripe", store=store, board=board, sleep=lambda s: None)
    board.close()
    store.close()


def post(
    app: ProviderApp, path: str, body: str, *, key: str | None = "k-1", **headers: str
) -> Reply:
    h = {"content-type": FORM, **{k.replace("_", "-"): v for k, v in headers.items()}}
    if key is not None:
        h["idempotency-key"] = key
    return app.handle(Request("POST", path, h, body.encode()))


def get(app: ProviderApp, target: str, **headers: str) -> Reply:
    return app.handle(Request("GET", target, {k.replace("_", "-"): v for k, v in headers.items()}))


def doc(reply: Reply) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(reply.body)
    return value


def header(reply: Reply, name: str) -> str | None:
    return next((v for k, v in reply.headers if k.lower() == name.lower()), None)


def error(reply: Reply) -> dict[str, Any]:
    assert reply.content_type == "application/json"
    assert str(header(reply, "Request-Id")).startswith("req_")
    err: dict[str, Any] = doc(reply)["error"]
    return err


# -- encodings ------------------------------------------------------------------------


def test_form_nests_brackets_and_numbered_lists() -> None:
    body = b"a=1&metadata[job_id]=j-1&types[0]=card&types[1]=link&x[]=p&x[]=q&apm[enabled]=true"
    assert decode_form(body, FORM) == {
        "a": "1",
        "metadata": {"job_id": "j-1"},
        "types": ["card", "link"],
        "x": ["p", "q"],
        "apm": {"enabled": "true"},
    }


@pytest.mark.parametrize(
    ("body", "ctype", "words"),
    [
        (b"a=1&a=2", FORM, "given twice"),
        (b"a=1&a[b]=2", FORM, "has a value"),
        (b"a[b=1", FORM, "unbalanced"),
        (b"[x]=1", FORM, "empty"),
        (b"a" + b"[b]" * 9 + b"=1", FORM, "deep"),
        (b"a=\xff", FORM, "UTF-8"),
        (b'{"a": 1}', "application/json", "x-www-form-urlencoded"),
    ],
)
def test_form_refuses_what_stripe_cannot_read(body: bytes, ctype: str, words: str) -> None:
    with pytest.raises(StripeProblem) as caught:
        decode_form(body, ctype)
    assert caught.value.status == 400
    assert words in caught.value.detail


def test_search_query_subset() -> None:
    fields = frozenset({"status", "email"})
    q = parse_query("metadata['job_id']:'j-1' AND status:\"succeeded\"", fields)
    assert q.job_id() == "j-1"
    assert q.matches({"metadata": {"job_id": "j-1"}, "status": "succeeded"})
    assert not q.matches({"metadata": {"job_id": "j-1"}, "status": "canceled"})
    either = parse_query("metadata['job_id']:'j-1' OR metadata['job_id']:'j-2'", fields)
    assert either.job_id() is None
    assert either.matches({"metadata": {"job_id": "j-2"}})
    assert parse_query("email:'a b@x.io'", fields).matches({"email": "a b@x.io"})
    for bad in ("a:'1' AND b:'2' OR c:'3'", "amount>10", "nickname:'x'"):
        with pytest.raises(StripeProblem):
            parse_query(bad, fields)


# -- creates --------------------------------------------------------------------------


def test_payment_intent_confirmed_is_succeeded_in_stripes_shape(app: ProviderApp) -> None:
    reply = post(app, "/v1/payment_intents", PI_BODY + "&payment_method_types[0]=card")
    assert reply.status == 200
    pi = doc(reply)
    assert pi["id"].startswith("pi_")
    assert len(pi["id"]) == 27
    assert pi["object"] == "payment_intent"
    assert pi["livemode"] is False
    assert pi["status"] == "succeeded"
    assert pi["amount_received"] == 1000
    assert pi["latest_charge"].startswith("ch_")
    assert pi["client_secret"].startswith(pi["id"] + "_secret_")
    assert isinstance(pi["created"], int)
    assert pi["metadata"] == {"job_id": "j-0001"}
    assert header(reply, "Idempotency-Key") == "k-1"
    assert str(header(reply, "Request-Id")).startswith("req_")
    [obj] = app.store.objects(resource="payment_intent")
    assert obj["object_id"] == pi["id"]
    assert obj["job_id"] == "j-0001"
    assert json.loads(obj["body"]) == pi


@pytest.mark.parametrize(
    ("extra", "status"),
    [
        ("", "requires_payment_method"),
        ("&payment_method=pm_card_visa", "requires_confirmation"),
        ("&confirm=true&capture_method=manual", "requires_capture"),
    ],
)
def test_payment_intent_status_follows_its_parameters(
    app: ProviderApp, extra: str, status: str
) -> None:
    body = "amount=500&currency=EUR&metadata[job_id]=j-1" + extra
    pi = doc(post(app, "/v1/payment_intents", body))
    assert pi["status"] == status
    assert pi["currency"] == "eur"


def test_replay_is_byte_for_byte_and_one_effect(app: ProviderApp) -> None:
    first = post(app, "/v1/payment_intents", PI_BODY)
    again = post(app, "/v1/payment_intents", PI_BODY)
    assert again.status == 200
    assert again.body == first.body
    assert header(again, "Idempotent-Replayed") == "true"
    assert header(again, "Request-Id") != header(first, "Request-Id")
    assert len(app.store.effects()) == 1
    assert [a["replayed"] for a in app.store.arrivals()] == [False, True]


def test_same_key_other_parameters_is_stripes_idempotency_error(app: ProviderApp) -> None:
    post(app, "/v1/payment_intents", PI_BODY)
    reply = post(app, "/v1/payment_intents", PI_BODY.replace("1000", "2000"))
    assert reply.status == 400
    assert error(reply)["type"] == "idempotency_error"
    assert len(app.store.effects()) == 1


def test_same_key_in_flight_is_409_idempotency_key_in_use(app: ProviderApp) -> None:
    fault_id = app.board.arm(Fault("hold_before_commit", job="j-0001"))
    replies: list[Reply] = []
    t = threading.Thread(target=lambda: replies.append(post(app, "/v1/payment_intents", PI_BODY)))
    t.start()
    assert app.board.wait_held(fault_id, 10.0) is not None
    reply = post(app, "/v1/payment_intents", PI_BODY)
    assert reply.status == 409
    assert error(reply) | {"message": ""} == {
        "type": "idempotency_error",
        "code": "idempotency_key_in_use",
        "doc_url": "https://stripe.com/docs/error-codes/idempotency-key-in-use",
        "message": "",
    }
    app.board.release(fault_id, "commit")
    t.join(10)
    assert replies[0].status == 200
    assert len(app.store.effects()) == 1


def test_post_without_key_is_refused_and_recorded_without_one(app: ProviderApp) -> None:
    reply = post(app, "/v1/customers", "email=a@x.io&metadata[job_id]=j-1", key=None)
    assert reply.status == 400
    err = error(reply)
    assert err["type"] == "invalid_request_error"
    assert err["code"] == "parameter_missing"
    assert "Idempotency-Key" in err["message"]
    [arrival] = app.store.arrivals()
    assert arrival["idempotency_key"] is None
    assert arrival["job_id"] == "j-1"
    assert arrival["status"] == 400
    assert app.store.effects() == []


def test_validation_failure_saves_no_result_under_the_key(app: ProviderApp) -> None:
    # Stripe saves no idempotent result for a request that failed validation.
    refused = post(app, "/v1/payment_intents", "amount=1000&currency=usd")
    assert refused.status == 400
    assert error(refused)["param"] == "metadata[job_id]"
    assert post(app, "/v1/payment_intents", PI_BODY).status == 200


@pytest.mark.parametrize(
    ("path", "body", "param", "code"),
    [
        ("/v1/payment_intents", "currency=usd&metadata[job_id]=j", "amount", "parameter_missing"),
        ("/v1/payment_intents", "amount=1.5&currency=usd&metadata[job_id]=j", "amount", None),
        ("/v1/payment_intents", "amount=10&currency=dollars&metadata[job_id]=j", "currency", None),
        ("/v1/payment_intents", "amount=10&currency=usd&metadata[job_id]=j&tip=1", "tip", None),
        (
            "/v1/payment_intents",
            "amount=10&currency=usd&metadata[job_id]=j&expand[]=x",
            "expand",
            None,
        ),
        (
            "/v1/payment_intents",
            "amount=10&currency=usd&metadata[job_id]=j&customer=cus_nope",
            "customer",
            "resource_missing",
        ),
        ("/v1/refunds", "metadata[job_id]=j", "payment_intent", "parameter_missing"),
        ("/v1/refunds", "charge=ch_nope&metadata[job_id]=j", "charge", "resource_missing"),
        ("/v1/customers", "metadata[job_id][x]=j", "metadata[job_id]", None),
    ],
)
def test_bad_parameters_are_invalid_request_errors(
    app: ProviderApp, path: str, body: str, param: str, code: str | None
) -> None:
    reply = post(app, path, body)
    assert reply.status == 400
    err = error(reply)
    assert err["type"] == "invalid_request_error"
    assert err["param"] == param
    assert err.get("code") == code or code is None
    assert app.store.effects() == []


def test_refund_follows_its_payment_intent(app: ProviderApp) -> None:
    pi = doc(post(app, "/v1/payment_intents", PI_BODY))
    unpaid = doc(
        post(app, "/v1/payment_intents", "amount=5&currency=usd&metadata[job_id]=j-2", key="k-2")
    )
    too_much = post(
        app, "/v1/refunds", f"payment_intent={pi['id']}&amount=1001&metadata[job_id]=j-3", key="r"
    )
    assert error(too_much)["code"] == "amount_too_large"
    not_paid = post(
        app, "/v1/refunds", f"payment_intent={unpaid['id']}&metadata[job_id]=j-3", key="r"
    )
    assert error(not_paid)["code"] == "charge_not_refundable"
    by_charge = post(
        app, "/v1/refunds", f"charge={pi['latest_charge']}&metadata[job_id]=j-3", key="r"
    )
    re = doc(by_charge)
    assert re["id"].startswith("re_")
    assert re["object"] == "refund"
    assert re["status"] == "succeeded"
    assert (re["amount"], re["currency"], re["payment_intent"]) == (1000, "usd", pi["id"])


def test_customer_shape(app: ProviderApp) -> None:
    cus = doc(post(app, "/v1/customers", "email=a%40x.io&name=Ada&metadata[job_id]=j-1"))
    assert cus["id"].startswith("cus_")
    assert cus["object"] == "customer"
    assert (cus["email"], cus["name"], cus["balance"], cus["description"]) == (
        "a@x.io",
        "Ada",
        0,
        None,
    )


# -- lookups --------------------------------------------------------------------------


def test_retrieve_list_and_search_are_lookups_for_their_job(app: ProviderApp) -> None:
    one = doc(post(app, "/v1/payment_intents", PI_BODY))
    two = doc(post(app, "/v1/payment_intents", PI_BODY.replace("j-0001", "j-0002"), key="k-2"))
    assert doc(get(app, f"/v1/payment_intents/{one['id']}")) == one
    listed = doc(get(app, "/v1/payment_intents?limit=1"))
    assert listed | {"data": []} == {
        "object": "list",
        "data": [],
        "has_more": True,
        "url": "/v1/payment_intents",
    }
    assert listed["data"] == [two]  # newest first
    after = doc(get(app, f"/v1/payment_intents?limit=1&starting_after={two['id']}"))
    assert after["data"] == [one]
    assert after["has_more"] is False
    query = quote("metadata['job_id']:'j-0001'")
    found = doc(get(app, f"/v1/payment_intents/search?query={query}"))
    assert found["object"] == "search_result"
    assert found["data"] == [one]
    assert found["has_more"] is False
    assert found["next_page"] is None
    lookups = [
        (a["path"], a["job_id"], a["status"]) for a in app.store.arrivals() if a["kind"] == "lookup"
    ]
    assert lookups == [
        (f"/v1/payment_intents/{one['id']}", "j-0001", 200),
        ("/v1/payment_intents", "j-0002", 200),
        ("/v1/payment_intents", "j-0001", 200),
        ("/v1/payment_intents/search", "j-0001", 200),
    ]


def test_customer_search_and_list_filters(app: ProviderApp) -> None:
    cus = doc(post(app, "/v1/customers", "email=a%40x.io&metadata[job_id]=j-1"))
    post(app, "/v1/customers", "email=b%40x.io&metadata[job_id]=j-2", key="k-2")
    assert doc(get(app, "/v1/customers?email=a%40x.io"))["data"] == [cus]
    found = doc(get(app, "/v1/customers/search?query=" + quote("email:'a@x.io'")))
    assert found["data"] == [cus]
    assert app.store.arrivals()[-1]["job_id"] == "j-1"  # the one job its results belong to
    both = doc(get(app, "/v1/customers?limit=5"))
    assert len(both["data"]) == 2
    assert app.store.arrivals()[-1]["job_id"] is None


@pytest.mark.parametrize(
    ("target", "status", "code"),
    [
        ("/v1/payment_intents/pi_nope", 404, "resource_missing"),
        ("/v1/refunds/search?query=x:'1'", 404, "resource_missing"),  # refunds have no search
        ("/v1/payment_intents?limit=0", 400, None),
        ("/v1/payment_intents?colour=red", 400, None),
        ("/v1/payment_intents/search", 400, "parameter_missing"),
        ("/v1/payment_intents?starting_after=pi_gone", 404, "resource_missing"),
    ],
)
def test_bad_lookups_are_recorded_and_refused(
    app: ProviderApp, target: str, status: int, code: str | None
) -> None:
    reply = get(app, target)
    assert reply.status == status
    err = error(reply)
    assert err["type"] == "invalid_request_error"
    assert err.get("code") == code
    assert [a["status"] for a in app.store.arrivals()] == [status]


def test_unknown_route_and_method_are_stripes_404(app: ProviderApp) -> None:
    for reply in (get(app, "/v1/charges"), app.handle(Request("DELETE", "/v1/customers"))):
        assert reply.status == 404
        assert header(reply, "Allow") is None
        assert error(reply)["type"] == "invalid_request_error"


# -- faults and identities ------------------------------------------------------------


def test_injected_failures_are_api_errors(app: ProviderApp) -> None:
    app.board.arm(Fault("fail_before_commit", job="j-0001", status=503))
    reply = post(app, "/v1/payment_intents", PI_BODY)
    assert reply.status == 503
    assert error(reply)["type"] == "api_error"
    pi = doc(post(app, "/v1/payment_intents", PI_BODY))  # the key stayed free
    app.board.arm(Fault("fail_lookup", job="j-0001"))
    failed = get(app, f"/v1/payment_intents/{pi['id']}")
    assert failed.status == 503
    assert error(failed)["type"] == "api_error"
    assert app.store.arrivals()[-1]["fault"] == "fail_lookup"


def test_identity_faults_are_authentication_and_permission_errors(app: ProviderApp) -> None:
    app.identities.set("acct-1", "expired")
    app.identities.set("acct-2", "changed", now_acts_as="acct-9")
    expired = post(app, "/v1/payment_intents", PI_BODY, x_crashpoint_identity="acct-1")
    assert expired.status == 401
    assert error(expired) | {"message": ""} == {
        "type": "authentication_error",
        "code": "api_key_expired",
        "doc_url": "https://stripe.com/docs/error-codes/api-key-expired",
        "message": "",
    }
    changed = get(app, "/v1/customers", x_crashpoint_identity="acct-2")
    assert changed.status == 403
    assert error(changed)["type"] == "permission_error"
    assert header(changed, "X-Crashpoint-Identity") == "acct-9"
    assert app.store.effects() == []
