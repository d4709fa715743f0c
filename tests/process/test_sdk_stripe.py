"""The unmodified Stripe SDKs (Python and Node) against the stripe persona.

Each test drives the SDK only through its documented settings (base address, retries,
timeout, per-request options) and judges by the provider's ground truth: arrivals and
effects, not only what the SDK returned.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import stripe
from stripe.params import PaymentIntentCreateParams

from fake_providers import Fault, ProviderProcess, start_provider

pytestmark = pytest.mark.process

NODE_DIR = Path(__file__).resolve().parents[1] / "sdk-node"
KEY = "sk_test_crashpoint"
Client = Callable[..., stripe.StripeClient]


@pytest.fixture
def p(tmp_path: Path) -> Iterator[ProviderProcess]:
    provider = start_provider("stripe", state_path=tmp_path / "stripe.db")
    yield provider
    provider.close()


@pytest.fixture
def client(p: ProviderProcess) -> Client:
    """A StripeClient on the persona; retries and the timeout always set explicitly."""

    def make(*, retries: int = 0, timeout: float = 5.0) -> stripe.StripeClient:
        return stripe.StripeClient(
            KEY,
            base_addresses={"api": p.url},
            max_network_retries=retries,
            http_client=stripe.RequestsClient(timeout=timeout),
        )

    return make


def intent(job: str, amount: int = 1000) -> PaymentIntentCreateParams:
    return {"amount": amount, "currency": "usd", "confirm": True, "metadata": {"job_id": job}}


def arrivals(p: ProviderProcess) -> list[dict[str, Any]]:
    return [a.to_json() for a in p.client.arrivals()]


def effects(p: ProviderProcess) -> list[dict[str, Any]]:
    return [e.to_json() for e in p.client.effects()]


def writes(p: ProviderProcess) -> list[dict[str, Any]]:
    return [a for a in arrivals(p) if a["kind"] == "write"]


class Background:
    """An SDK call in a thread, so the test can act while the provider holds it."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: Exception | None = None
        self._t = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._t.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.result = fn()
        except Exception as exc:
            self.error = exc

    def join(self) -> None:
        self._t.join(10)
        assert not self._t.is_alive()


def test_create_replay_and_lookups(p: ProviderProcess, client: Client) -> None:
    sc = client()
    pi = sc.v1.payment_intents.create(intent("j-0001"), {"idempotency_key": "job-j-0001"})
    assert isinstance(pi, stripe.PaymentIntent)
    assert pi.id.startswith("pi_")
    assert pi.status == "succeeded"
    assert pi.metadata["job_id"] == "j-0001"
    assert pi.last_response is not None
    assert pi.last_response.request_id.startswith("req_")  # type: ignore[union-attr]
    again = sc.v1.payment_intents.create(intent("j-0001"), {"idempotency_key": "job-j-0001"})
    assert again.id == pi.id
    assert again.last_response is not None
    assert again.last_response.headers["Idempotent-Replayed"] == "true"
    [effect] = effects(p)
    assert (effect["job_id"], effect["idempotency_key"]) == ("j-0001", "job-j-0001")
    assert [w["replayed"] for w in writes(p)] == [False, True]

    assert sc.v1.payment_intents.retrieve(pi.id).amount == 1000
    assert [x.id for x in sc.v1.payment_intents.list({"limit": 3}).data] == [pi.id]
    found = sc.v1.payment_intents.search({"query": "metadata['job_id']:'j-0001'"})
    assert [x.id for x in found.data] == [pi.id]
    assert found.has_more is False
    cus = sc.v1.customers.create(
        {"email": "ada@example.com", "metadata": {"job_id": "j-0002"}},
        {"idempotency_key": "job-j-0002"},
    )
    assert isinstance(cus, stripe.Customer)
    assert [c.id for c in sc.v1.customers.search({"query": "email:'ada@example.com'"}).data] == [
        cus.id
    ]
    re = sc.v1.refunds.create(
        {"payment_intent": pi.id, "metadata": {"job_id": "j-0003"}},
        {"idempotency_key": "job-j-0003"},
    )
    assert isinstance(re, stripe.Refund)
    assert (re.status, re.amount, re.payment_intent) == ("succeeded", 1000, pi.id)
    assert [r.id for r in sc.v1.refunds.list({"payment_intent": pi.id}).data] == [re.id]
    with pytest.raises(stripe.InvalidRequestError) as missing:
        sc.v1.payment_intents.retrieve("pi_missing")
    assert missing.value.code == "resource_missing"
    assert missing.value.http_status == 404
    lookups = [(a["path"], a["job_id"]) for a in arrivals(p) if a["kind"] == "lookup"]
    assert lookups == [
        (f"/v1/payment_intents/{pi.id}", "j-0001"),
        ("/v1/payment_intents", "j-0001"),
        ("/v1/payment_intents/search", "j-0001"),
        ("/v1/customers/search", "j-0002"),
        ("/v1/refunds", "j-0003"),
        ("/v1/payment_intents/pi_missing", None),
    ]


def test_same_key_other_parameters_is_idempotency_error(p: ProviderProcess, client: Client) -> None:
    sc = client()
    sc.v1.payment_intents.create(intent("j-0001"), {"idempotency_key": "k"})
    with pytest.raises(stripe.IdempotencyError) as caught:
        sc.v1.payment_intents.create(intent("j-0001", 2000), {"idempotency_key": "k"})
    assert caught.value.http_status == 400
    assert len(effects(p)) == 1


def test_same_key_in_flight_is_a_409_the_sdk_raises_as_api_error_and_retries(
    p: ProviderProcess, client: Client
) -> None:
    fault_id = p.client.arm(Fault("hold_before_commit", job="j-0001"))
    opts: Any = {"idempotency_key": "k"}
    first = Background(lambda: client().v1.payment_intents.create(intent("j-0001"), opts))
    p.client.wait_held(fault_id, timeout_s=10)
    # A 409 is not one of the statuses (400, 404) the SDK maps to IdempotencyError: it
    # raises the generic APIError, and with retries on it retries the 409 (same key).
    with pytest.raises(stripe.APIError) as caught:
        client(retries=1).v1.payment_intents.create(intent("j-0001"), opts)
    assert not isinstance(caught.value, stripe.IdempotencyError)
    assert caught.value.http_status == 409
    assert caught.value.error is not None
    assert caught.value.error.code == "idempotency_key_in_use"
    p.client.release(fault_id, "drop")
    first.join()
    assert isinstance(first.error, stripe.APIConnectionError)
    assert [(w["idempotency_key"], w["status"]) for w in writes(p)] == [
        ("k", None),
        ("k", 409),
        ("k", 409),
    ]
    assert effects(p) == []
    # The drop freed the key: the job's retry under it commits now.
    assert client().v1.payment_intents.create(intent("j-0001"), opts).status == "succeeded"


def test_faults_as_the_sdk_surfaces_them(p: ProviderProcess, client: Client) -> None:
    sc = client(timeout=0.5)
    p.client.arm(Fault("fail_before_commit", job="j-1", status=503))
    with pytest.raises(stripe.APIError) as failed:
        sc.v1.payment_intents.create(intent("j-1"), {"idempotency_key": "k-1"})
    assert failed.value.http_status == 503
    assert effects(p) == []

    p.client.arm(Fault("drop_after_commit", job="j-2"))
    with pytest.raises(stripe.APIConnectionError):
        sc.v1.payment_intents.create(intent("j-2"), {"idempotency_key": "k-2"})
    p.client.arm(Fault("delay_response", job="j-3", delay_s=1.5))
    with pytest.raises(stripe.APIConnectionError):
        sc.v1.payment_intents.create(intent("j-3"), {"idempotency_key": "k-3"})
    hold = p.client.arm(Fault("hold_after_commit", job="j-4"))
    held = Background(
        lambda: client().v1.payment_intents.create(intent("j-4"), {"idempotency_key": "k-4"})
    )
    p.client.wait_held(hold, timeout_s=10)
    p.client.release(hold, "drop")
    held.join()
    assert isinstance(held.error, stripe.APIConnectionError)
    # Each of the three left an effect the client never saw: only a lookup or a retry
    # under the same key can find it.
    assert [e["job_id"] for e in effects(p)] == ["j-2", "j-3", "j-4"]
    found = client().v1.payment_intents.search({"query": "metadata['job_id']:'j-4'"})
    replay = client().v1.payment_intents.create(intent("j-4"), {"idempotency_key": "k-4"})
    assert [x.id for x in found.data] == [replay.id]

    p.client.arm(Fault("fail_lookup", job="j-4"))
    with pytest.raises(stripe.APIError) as lookup:
        client().v1.payment_intents.retrieve(replay.id)
    assert lookup.value.http_status == 503


def test_identity_faults_as_the_sdk_surfaces_them(p: ProviderProcess, client: Client) -> None:
    p.client.set_identity("acct-1", "expired")
    p.client.set_identity("acct-2", "changed", now_acts_as="acct-9")
    sc = client()
    as_1: Any = {"idempotency_key": "k", "headers": {"X-Crashpoint-Identity": "acct-1"}}
    with pytest.raises(stripe.AuthenticationError) as expired:
        sc.v1.payment_intents.create(intent("j-1"), as_1)
    assert expired.value.http_status == 401
    as_2: Any = {"headers": {"X-Crashpoint-Identity": "acct-2"}}
    with pytest.raises(stripe.PermissionError) as changed:
        sc.v1.payment_intents.list(None, as_2)
    assert changed.value.headers is not None
    assert changed.value.headers["X-Crashpoint-Identity"] == "acct-9"
    assert [a["identity"] for a in arrivals(p)] == ["acct-1", "acct-2"]
    assert effects(p) == []


def test_sdk_retry_reuses_its_key_but_a_second_call_does_not(
    p: ProviderProcess, client: Client
) -> None:
    sc = client(retries=1)
    # stripe-python keys every POST itself; its network retry of one call reuses that key,
    # so the retry after a drop is answered by the replay: one effect.
    p.client.arm(Fault("drop_after_commit", job="j-1"))
    pi = sc.v1.payment_intents.create(intent("j-1"))
    first = writes(p)
    assert [(w["status"], w["replayed"]) for w in first] == [(None, False), (200, True)]
    auto_key = first[0]["idempotency_key"]
    assert auto_key
    assert first[1]["idempotency_key"] == auto_key
    # A 5xx retried by the SDK also keeps the key.
    p.client.arm(Fault("fail_before_commit", job="j-2", status=500))
    sc.v1.payment_intents.create(intent("j-2"))
    j2 = [w for w in writes(p) if w["job_id"] == "j-2"]
    assert [w["status"] for w in j2] == [500, 200]
    assert j2[0]["idempotency_key"] == j2[1]["idempotency_key"]
    # The worker's own retry of the job (a second SDK call) gets a fresh key: a second
    # charge. Only a key the worker passes (and keeps) makes the job's retry a replay.
    dup = sc.v1.payment_intents.create(intent("j-1"))
    assert dup.id != pi.id
    j1_effects = [e for e in effects(p) if e["job_id"] == "j-1"]
    assert len(j1_effects) == 2
    assert j1_effects[1]["idempotency_key"] != auto_key
    keep: Any = {"idempotency_key": "job-j-3"}
    kept = [sc.v1.payment_intents.create(intent("j-3"), keep).id for _ in range(2)]
    assert kept[0] == kept[1]
    assert len([e for e in effects(p) if e["job_id"] == "j-3"]) == 1


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_node_sdk(p: ProviderProcess) -> None:
    """stripe-node: create, replay, a 5xx as StripeAPIError, and a drop after commit."""
    p.client.arm(Fault("fail_before_commit", job="j-5xx", status=503))
    p.client.arm(Fault("drop_after_commit", job="j-drop"))
    out = subprocess.run(
        ["node", "stripe_check.js", p.url],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "NODE_PATH": str(NODE_DIR / "node_modules")},
        check=False,
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["replay_same_id"] is True
    assert seen["replayed_header"] == "true"
    assert seen["error_class"] == "StripeAPIError"
    assert seen["error_status"] == 503
    by_job: dict[str, list[dict[str, Any]]] = {}
    for w in writes(p):
        by_job.setdefault(w["job_id"], []).append(w)
    assert len({w["idempotency_key"] for w in by_job["j-create"]}) == 1
    assert [w["status"] for w in by_job["j-5xx"]] == [503]
    # stripe-node retries a reset connection once even with maxNetworkRetries 0, under
    # the same key: the drop after commit is healed by the replay, one effect.
    drop = by_job["j-drop"]
    assert [(w["status"], w["replayed"]) for w in drop] == [(None, False), (200, True)]
    assert drop[0]["idempotency_key"] == drop[1]["idempotency_key"]
    assert drop[0]["idempotency_key"].startswith("stripe-node-retry-")
    assert seen["drop_status"] == "succeeded"
    assert sorted(e["job_id"] for e in effects(p)) == ["j-create", "j-drop"]
