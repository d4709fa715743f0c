"""The unmodified ``slack_sdk`` (3.48.0) and ``@slack/web-api`` (8.2.0) against the slack
persona: posts (no idempotency: two posts, two effects), the history read that finds a
message by its metadata marker, every fault as each SDK surfaces it, and the SDKs' own
retries, checked against the provider's arrivals and effects."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry import RateLimitErrorRetryHandler
from slack_sdk.http_retry.builtin_handlers import ServerErrorRetryHandler
from slack_sdk.http_retry.builtin_interval_calculators import FixedValueRetryIntervalCalculator

from fake_providers import Fault, ProviderProcess, start_provider

pytestmark = pytest.mark.process

NODE_DIR = Path(__file__).resolve().parents[1] / "sdk-node"
JOB, MARKER = "j-0001", "m-7f3a"
META = {"event_type": "crashpoint_job", "event_payload": {"job_id": JOB, "client_marker": MARKER}}


@pytest.fixture(scope="module")
def p(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProviderProcess]:
    with start_provider("slack", state_path=tmp_path_factory.mktemp("slack") / "s.db") as proc:
        yield proc


@pytest.fixture(autouse=True)
def _fresh(p: ProviderProcess) -> None:
    p.wipe()


def web(p: ProviderProcess, **kw: Any) -> WebClient:
    """A WebClient with no retries unless given, so each test sees one attempt."""
    kw.setdefault("retry_handlers", [])
    return WebClient(token="xoxb-crashpoint", base_url=p.url + "/api/", timeout=5, **kw)


def post(client: WebClient) -> Any:
    return client.chat_postMessage(channel="C1", text=f"job {JOB}", metadata=META)


def writes(p: ProviderProcess) -> list[Any]:
    return [a for a in p.client.arrivals() if a.kind == "write"]


def in_thread(fn: Any) -> Future[Any]:
    pool = ThreadPoolExecutor(1)
    future = pool.submit(fn)
    pool.shutdown(wait=False)
    return future


def test_two_posts_are_two_effects_and_history_finds_them_by_marker(p: ProviderProcess) -> None:
    client = web(p)
    assert client.auth_test()["user_id"] == "U0CRASHPT"
    first, second = post(client), post(client)
    assert first["ok"]
    assert first["ts"] != second["ts"]
    assert first["channel"] == "C1"
    assert first["message"]["metadata"] == META
    assert [(e.job_id, e.client_marker) for e in p.client.effects()] == [(JOB, MARKER)] * 2
    history = client.conversations_history(channel="C1", include_all_metadata=True)
    found = [
        m["ts"]
        for m in history["messages"]
        if m.get("metadata", {}).get("event_payload", {}).get("client_marker") == MARKER
    ]
    assert found == [second["ts"], first["ts"]]  # newest first
    (lookup,) = [a for a in p.client.arrivals() if a.kind == "lookup"]
    assert (lookup.job_id, lookup.client_marker, lookup.status) == (JOB, MARKER, 200)


def test_a_5xx_is_a_slack_api_error_and_is_not_retried_by_default(p: ProviderProcess) -> None:
    p.client.arm(Fault("fail_before_commit", status=503))
    with pytest.raises(SlackApiError) as caught:
        post(WebClient(token="x", base_url=p.url + "/api/"))  # default retry handlers
    assert caught.value.response.status_code == 503
    assert caught.value.response["error"] == "service_unavailable"
    assert len(writes(p)) == 1
    assert p.client.effects() == []


def test_the_server_error_retry_handler_retries_a_5xx_once(p: ProviderProcess) -> None:
    p.client.arm(Fault("fail_before_commit", status=500))
    handler = ServerErrorRetryHandler(
        max_retry_count=1, interval_calculator=FixedValueRetryIntervalCalculator(0.0)
    )
    assert post(web(p, retry_handlers=[handler]))["ok"]
    assert [w.status for w in writes(p)] == [500, 200]
    assert len(p.client.effects()) == 1


def test_a_dropped_post_is_retried_by_default_and_commits_twice(p: ProviderProcess) -> None:
    # slack_sdk's default ConnectionErrorRetryHandler resends a post whose connection
    # was reset: the worker gets a duplicate message without asking for one.
    p.client.arm(Fault("drop_after_commit", job=JOB))
    assert post(WebClient(token="x", base_url=p.url + "/api/", timeout=5))["ok"]
    assert [w.status for w in writes(p)] == [None, 200]
    assert len(p.client.effects()) == 2


@pytest.mark.parametrize(
    ("action", "effects"), [("hold_before_commit", 0), ("hold_after_commit", 1)]
)
def test_a_held_post_dropped_is_a_connection_error(
    p: ProviderProcess, action: str, effects: int
) -> None:
    fault = p.client.arm(Fault(action, job=JOB))
    future = in_thread(lambda: post(web(p)))
    p.client.wait_held(fault, timeout_s=5)
    p.client.release(fault, "drop")
    with pytest.raises((ConnectionError, OSError)):
        future.result(timeout=5)
    assert len(p.client.effects()) == effects
    assert len(writes(p)) == 1


def test_a_delay_past_the_timeout_raises_but_the_message_exists(p: ProviderProcess) -> None:
    p.client.arm(Fault("delay_response", delay_s=2.0))
    with pytest.raises(TimeoutError):
        post(WebClient(token="x", base_url=p.url + "/api/", timeout=1, retry_handlers=[]))
    assert len(p.client.effects()) == 1


def test_429_is_ratelimited_and_the_rate_limit_handler_waits_and_retries(
    p: ProviderProcess,
) -> None:
    p.client.arm(Fault("fail_before_commit", status=429))
    with pytest.raises(SlackApiError) as caught:
        post(web(p))
    assert caught.value.response.status_code == 429
    assert caught.value.response["error"] == "ratelimited"
    assert caught.value.response.headers["Retry-After"] == "1"
    p.client.arm(Fault("fail_before_commit", status=429))
    assert post(web(p, retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=1)]))["ok"]
    assert [w.status for w in writes(p)] == [429, 429, 200]
    assert len(p.client.effects()) == 1


def test_a_failed_lookup_and_a_refused_identity(p: ProviderProcess) -> None:
    p.client.arm(Fault("fail_lookup", status=503))
    with pytest.raises(SlackApiError) as caught:
        web(p).conversations_history(channel="C1")
    assert caught.value.response.status_code == 503
    p.client.set_identity("acct-1", "expired")
    client = web(p, headers={"X-Crashpoint-Identity": "acct-1"})
    with pytest.raises(SlackApiError) as caught:
        post(client)
    # Slack answers HTTP 200 with ok: false; the arrival records the refusal as a 401.
    assert caught.value.response.status_code == 200
    assert caught.value.response["error"] == "token_expired"
    p.client.set_identity("acct-1", "changed", now_acts_as="acct-9")
    with pytest.raises(SlackApiError) as caught:
        post(client)
    assert caught.value.response["error"] == "invalid_auth"
    assert [w.status for w in writes(p)] == [401, 403]
    assert p.client.effects() == []


# -- @slack/web-api ------------------------------------------------------------------


def node(p: ProviderProcess, scenario: str) -> dict[str, Any]:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    out = subprocess.run(
        ["node", "slack_check.js", p.url, scenario, JOB, MARKER],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_node_posts_twice_and_finds_the_message_by_marker(p: ProviderProcess) -> None:
    out = node(p, "post")
    assert out["ok"]
    assert out["found"] == [out["second"], out["first"]]
    assert len(p.client.effects()) == 2
    assert [a.kind for a in p.client.arrivals()] == ["write", "write", "lookup"]


def test_node_faults_as_the_sdk_surfaces_them(p: ProviderProcess) -> None:
    p.client.arm(Fault("fail_before_commit"))
    assert node(p, "once")["code"] == "slack_webapi_http_error"
    p.client.arm(Fault("delay_response", delay_s=3.0))
    timed_out = node(p, "once")
    assert timed_out["code"] == "slack_webapi_request_error"
    assert "timeout" in timed_out["message"]
    assert node(p, "nometa")["error"] == "invalid_metadata_schema"
    p.client.set_identity("acct-1", "expired")
    assert node(p, "identity")["error"] == "token_expired"
    p.client.arm(Fault("fail_lookup"))
    assert node(p, "history")["statusCode"] == 503
    assert [w.status for w in writes(p)] == [503, 200, 422, 401]


def test_node_retries_a_5xx_and_a_drop_on_its_own_the_drop_commits_twice(
    p: ProviderProcess,
) -> None:
    p.client.arm(Fault("fail_before_commit"))
    assert node(p, "retried")["ok"]
    assert len(p.client.effects()) == 1
    p.client.arm(Fault("drop_after_commit"))
    assert node(p, "retried")["ok"]
    # The default retry policy resends after the reset: the free duplicate.
    assert [w.status for w in writes(p)] == [503, 200, None, 200]
    assert len(p.client.effects()) == 3


def test_node_429_rejects_or_waits_retry_after(p: ProviderProcess) -> None:
    p.client.arm(Fault("fail_before_commit", status=429))
    rejected = node(p, "reject429")
    assert rejected["code"] == "slack_webapi_rate_limited_error"
    assert rejected["retryAfter"] == 1
    p.client.arm(Fault("fail_before_commit", status=429))
    assert node(p, "wait429")["ok"]
    assert [w.status for w in writes(p)] == [429, 429, 200]
