"""The unpatched `resend` SDKs (Python, and Node through tests/sdk-node/resend_check.js)
against a resend persona provider.

What happened is asserted on the provider's ground truth (arrivals, effects). Neither
SDK retries anything. The Python SDK turns a connection reset or a timeout into
``ResendError(code=500, error_type="HttpClientError")``: by its code it looks like a
server error before commit, though the email may have gone out. The Node SDK returns
``{error: {name: "application_error", statusCode: null}}`` for the same. Either is
"unknown": retry under the same Idempotency-Key, or retrieve.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import resend
from resend import exceptions as rs_errors

from fake_providers import Fault, ProviderProcess, start_provider

pytestmark = pytest.mark.process

JOB = "j-0001"
NODE_DIR = Path(__file__).resolve().parents[1] / "sdk-node"


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProviderProcess]:
    state = tmp_path_factory.mktemp("resend") / "resend.db"
    with start_provider("resend", state_path=state) as p:
        yield p


class IdentityClient(resend.RequestsClient):
    """The SDK's documented HTTP-client seam (``resend.default_http_client``): the
    Python SDK has no per-request headers, so this is how a worker sends its own."""

    def __init__(self, timeout: float, headers: Mapping[str, str]) -> None:
        super().__init__(timeout=timeout)  # type: ignore[arg-type]
        self.extra = dict(headers)

    def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        json: dict[str, object] | list[object] | None = None,
        files: dict[str, Any] | None = None,
        data: dict[str, str] | None = None,
    ) -> tuple[bytes, int, Mapping[str, str]]:
        return super().request(method, url, {**headers, **self.extra}, json, files, data)


@pytest.fixture
def p(provider: ProviderProcess) -> Iterator[ProviderProcess]:
    """The provider, wiped, with the Python SDK's module settings pointed at it."""
    provider.wipe()
    saved = (resend.api_key, resend.api_url, resend.default_http_client)
    resend.api_key = "re_crashpoint_test"
    resend.api_url = provider.url  # the documented base URL (env RESEND_API_URL too)
    resend.default_http_client = resend.RequestsClient(timeout=2)
    yield provider
    resend.api_key, resend.api_url, resend.default_http_client = saved


def params(job: str = JOB, **extra: Any) -> Any:
    return {
        "from": "Acme <billing@example.com>",
        "to": ["customer@example.com"],
        "subject": "Your receipt",
        "html": "<p>Thanks</p>",
        "tags": [{"name": "job_id", "value": job}],
        **extra,
    }


def send(key: str = "k-1", **extra: Any) -> Any:
    return resend.Emails.send(params(**extra), {"idempotency_key": key})


def in_background(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Run ``fn`` in a thread; the returned join gives its result or the exception."""
    box: list[Any] = [None]

    def run() -> None:
        try:
            box[0] = fn()
        except BaseException as exc:
            box[0] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def join() -> Any:
        t.join(10.0)
        assert not t.is_alive()
        return box[0]

    return join


def writes(p: ProviderProcess) -> list[Any]:
    return [a for a in p.client.arrivals() if a.kind == "write"]


# -- Python SDK ------------------------------------------------------------------------


def test_create_then_replay_is_one_email(p: ProviderProcess) -> None:
    first = send()
    again = send()
    assert first["id"] == again["id"]
    (effect,) = p.client.effects()
    assert (effect.job_id, effect.idempotency_key) == (JOB, "k-1")
    assert [(a.committed, a.status) for a in writes(p)] == [(True, 200), (False, 200)]


def test_same_key_other_payload_is_invalid_idempotent_request(p: ProviderProcess) -> None:
    send()
    with pytest.raises(rs_errors.ResendError) as err:
        send(subject="Another subject")
    assert (err.value.code, err.value.error_type) == (409, "invalid_idempotent_request")
    assert len(p.client.effects()) == 1


def test_same_key_in_flight_is_concurrent_idempotent_requests(p: ProviderProcess) -> None:
    fault_id = p.client.arm(Fault("hold_before_commit", key="k-1"))
    join = in_background(send)
    p.client.wait_held(fault_id, timeout_s=10)
    with pytest.raises(rs_errors.ResendError) as err:
        send()
    assert (err.value.code, err.value.error_type) == (409, "concurrent_idempotent_requests")
    p.client.release(fault_id, "commit")
    assert join()["id"]
    assert len(p.client.effects()) == 1


def test_retrieve_is_the_lookup(p: ProviderProcess) -> None:
    email_id = send()["id"]
    email = resend.Emails.get(email_id)
    assert (email["object"], email["id"], email["last_event"]) == ("email", email_id, "delivered")
    assert email["tags"] == [{"name": "job_id", "value": JOB}]
    lookup = p.client.arrivals()[-1]
    assert (lookup.kind, lookup.job_id, lookup.status) == ("lookup", JOB, 200)
    with pytest.raises(rs_errors.ResendError) as err:
        resend.Emails.get("00000000-0000-4000-8000-000000000000")
    assert (err.value.code, err.value.error_type) == (404, "not_found")


def test_missing_field_is_missing_required_fields_error(p: ProviderProcess) -> None:
    body = params()
    del body["subject"]
    with pytest.raises(rs_errors.MissingRequiredFieldsError):
        resend.Emails.send(body, {"idempotency_key": "k-1"})
    assert p.client.effects() == []


@pytest.mark.parametrize(
    ("status", "error"), [(500, rs_errors.ApplicationError), (503, rs_errors.ResendError)]
)
def test_fail_before_commit_is_not_retried_and_leaves_the_key_free(
    p: ProviderProcess, status: int, error: type[rs_errors.ResendError]
) -> None:
    p.client.arm(Fault("fail_before_commit", key="k-1", status=status))
    with pytest.raises(error) as err:
        send()
    assert (err.value.code, err.value.error_type) == (status, "application_error")
    assert [a.status for a in writes(p)] == [status]  # one attempt: the SDK never retries
    send()
    assert len(p.client.effects()) == 1


@pytest.mark.parametrize("action", ["hold_before_commit", "hold_after_commit"])
def test_a_dropped_hold_looks_like_a_500_then_the_key_settles_it(
    p: ProviderProcess, action: str
) -> None:
    fault_id = p.client.arm(Fault(action, key="k-1"))
    join = in_background(send)
    p.client.wait_held(fault_id, timeout_s=10)
    p.client.release(fault_id, "drop")
    err = join()
    assert isinstance(err, rs_errors.ResendError)
    assert (err.code, err.error_type) == (500, "HttpClientError")
    committed = action == "hold_after_commit"
    assert len(p.client.effects()) == (1 if committed else 0)
    # The retry under the same key: replayed if it went out, executed if not.
    send()
    assert len(p.client.effects()) == 1
    assert [a.committed for a in writes(p)] == ([True, False] if committed else [False, True])


def test_drop_after_commit_then_retry_is_a_replay(p: ProviderProcess) -> None:
    p.client.arm(Fault("drop_after_commit", key="k-1"))
    with pytest.raises(rs_errors.ResendError) as err:
        send()
    assert err.value.error_type == "HttpClientError"
    email_id = send()["id"]
    (effect,) = p.client.effects()
    assert resend.Emails.get(email_id)["id"] == email_id
    assert effect.idempotency_key == "k-1"


def test_a_delay_past_the_clients_timeout_is_an_http_client_error(p: ProviderProcess) -> None:
    resend.default_http_client = resend.RequestsClient(timeout=0.3)  # type: ignore[arg-type]
    p.client.arm(Fault("delay_response", key="k-1", delay_s=1.0))
    with pytest.raises(rs_errors.ResendError) as err:
        send()
    assert (err.value.code, err.value.error_type) == (500, "HttpClientError")
    assert len(p.client.effects()) == 1
    assert len(writes(p)) == 1


def test_fail_lookup_is_a_resend_error_with_its_status(p: ProviderProcess) -> None:
    email_id = send()["id"]
    p.client.arm(Fault("fail_lookup", job=JOB, status=503))
    with pytest.raises(rs_errors.ResendError) as err:
        resend.Emails.get(email_id)
    assert (err.value.code, err.value.error_type) == (503, "application_error")
    assert p.client.arrivals()[-1].fault == "fail_lookup"


@pytest.mark.parametrize(
    ("state", "status", "error"),
    [("expired", 401, rs_errors.ResendError), ("changed", 403, rs_errors.InvalidApiKeyError)],
)
def test_identity_faults_are_invalid_api_key(
    p: ProviderProcess, state: str, status: int, error: type[rs_errors.ResendError]
) -> None:
    p.client.set_identity("acct-1", state, now_acts_as="acct-9" if state == "changed" else None)
    resend.default_http_client = IdentityClient(2, {"X-Crashpoint-Identity": "acct-1"})
    with pytest.raises(error) as err:
        send()
    assert (err.value.code, err.value.error_type) == (status, "invalid_api_key")
    assert p.client.effects() == []
    assert [a.identity for a in writes(p)] == ["acct-1"]


# -- Node SDK --------------------------------------------------------------------------


class NodeSDK:
    """resend_check.js: one Node process, commands in, results out by id."""

    def __init__(self, url: str) -> None:
        node = shutil.which("node")
        if node is None or not (NODE_DIR / "node_modules" / "resend").is_dir():
            pytest.skip("node or tests/sdk-node/node_modules/resend is not installed")
        self.proc = subprocess.Popen(
            [node, "resend_check.js", url],
            cwd=NODE_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._next = 0
        self._results: dict[int, dict[str, Any]] = {}

    def submit(self, op: str, **cmd: Any) -> int:
        self._next += 1
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"id": self._next, "op": op, **cmd}) + "\n")
        self.proc.stdin.flush()
        return self._next

    def result(self, cmd_id: int) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while cmd_id not in self._results:
            line = self.proc.stdout.readline()
            assert line, f"resend_check.js ended early (exit {self.proc.poll()})"
            doc = json.loads(line)
            self._results[doc["id"]] = doc
        return self._results.pop(cmd_id)

    def call(self, op: str, **cmd: Any) -> dict[str, Any]:
        return self.result(self.submit(op, **cmd))

    def close(self) -> None:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(10)
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def node(provider: ProviderProcess) -> Iterator[NodeSDK]:
    sdk = NodeSDK(provider.url)
    yield sdk
    sdk.close()


def test_node_create_replay_conflict_and_retrieve(p: ProviderProcess, node: NodeSDK) -> None:
    first = node.call("send", params=params(), key="k-1")
    again = node.call("send", params=params(), key="k-1")
    assert first["error"] is None
    assert first["data"]["id"] == again["data"]["id"]
    other = node.call("send", params=params(subject="Another"), key="k-1")
    assert other["error"]["statusCode"] == 409
    assert other["error"]["name"] == "invalid_idempotent_request"
    got = node.call("get", email_id=first["data"]["id"])
    assert (got["data"]["object"], got["data"]["id"]) == ("email", first["data"]["id"])
    assert len(p.client.effects()) == 1
    assert [(a.kind, a.status) for a in p.client.arrivals()] == [
        ("write", 200),
        ("write", 200),
        ("write", 409),
        ("lookup", 200),
    ]


def test_node_in_flight_then_fault_results(p: ProviderProcess, node: NodeSDK) -> None:
    before = p.client.arm(Fault("hold_before_commit", key="k-1"))
    held = node.submit("send", params=params(), key="k-1", timeout_ms=5000)
    p.client.wait_held(before, timeout_s=10)
    busy = node.call("send", params=params(), key="k-1")
    assert (busy["error"]["statusCode"], busy["error"]["name"]) == (
        409,
        "concurrent_idempotent_requests",
    )
    p.client.release(before, "drop")
    # A reset, like any network failure, is a result, not a throw: statusCode null.
    dropped = node.result(held)
    assert dropped["threw"] is None
    assert (dropped["error"]["name"], dropped["error"]["statusCode"]) == ("application_error", None)
    after = p.client.arm(Fault("hold_after_commit", key="k-1"))
    held = node.submit("send", params=params(), key="k-1", timeout_ms=5000)
    p.client.wait_held(after, timeout_s=10)
    p.client.release(after, "drop")
    assert node.result(held)["error"]["statusCode"] is None
    p.client.arm(Fault("fail_before_commit", key="k-2", status=503))
    failed = node.call("send", params=params(job="j-2"), key="k-2")
    assert (failed["error"]["name"], failed["error"]["statusCode"]) == ("application_error", 503)
    p.client.arm(Fault("delay_response", key="k-3", delay_s=1.0))
    late = node.call("send", params=params(job="j-3"), key="k-3", timeout_ms=300)
    assert late["threw"] is None
    assert late["error"]["statusCode"] is None
    replay = node.call("send", params=params(), key="k-1")  # the dropped one went out
    p.client.arm(Fault("fail_lookup", job=JOB, status=503))
    lookup = node.call("get", email_id=replay["data"]["id"])
    assert lookup["error"]["statusCode"] == 503
    # No retries: each call reached the provider exactly once.
    arrivals = [(a.kind, a.idempotency_key, a.committed) for a in p.client.arrivals()]
    assert arrivals == [
        ("write", "k-1", False),  # held before commit, dropped
        ("write", "k-1", False),  # 409 in flight
        ("write", "k-1", True),  # held after commit, dropped
        ("write", "k-2", False),  # 503
        ("write", "k-3", True),  # committed, answered after the SDK gave up
        ("write", "k-1", False),  # the replay
        ("lookup", "k-1", False),  # 503
    ]
    assert sorted(e.job_id or "" for e in p.client.effects()) == [JOB, "j-3"]


def test_node_identity_faults_through_request_headers(p: ProviderProcess, node: NodeSDK) -> None:
    p.client.set_identity("acct-1", "expired")
    p.client.set_identity("acct-2", "changed", now_acts_as="acct-9")
    expired = node.call(
        "send", params=params(), key="k-1", headers={"X-Crashpoint-Identity": "acct-1"}
    )
    changed = node.call(
        "send", params=params(), key="k-1", headers={"X-Crashpoint-Identity": "acct-2"}
    )
    assert (expired["error"]["statusCode"], expired["error"]["name"]) == (401, "invalid_api_key")
    assert (changed["error"]["statusCode"], changed["error"]["name"]) == (403, "invalid_api_key")
    assert p.client.effects() == []
