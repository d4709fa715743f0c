"""The unmodified ``githubkit`` (0.16.1) against the github persona: issues and comments
(no idempotency), the search that finds an issue by its marker, every fault as githubkit
surfaces it, and its own retries, checked against the provider's arrivals and effects."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from githubkit import GitHub
from githubkit.exception import (
    RequestError,
    RequestFailed,
    RequestTimeout,
    SecondaryRateLimitExceeded,
)
from githubkit.retry import RetryChainDecision, RetryRateLimit, RetryServerError

from fake_providers import Fault, ProviderProcess, start_provider

pytestmark = [pytest.mark.process, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

JOB, MARKER = "j-0001", "m-7f3a"
BODY = f"The refund failed.\n\n<!-- crashpoint-job: {JOB} crashpoint-marker: {MARKER} -->"


@pytest.fixture(scope="module")
def p(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProviderProcess]:
    with start_provider("github", state_path=tmp_path_factory.mktemp("gh") / "g.db") as proc:
        yield proc


@pytest.fixture(autouse=True)
def _fresh(p: ProviderProcess) -> None:
    p.wipe()


def gh(p: ProviderProcess, **kw: Any) -> GitHub[Any]:
    """githubkit without retries unless given; no HTTP cache, which ignores the timeout."""
    kw.setdefault("auto_retry", False)
    kw.setdefault("http_cache", False)
    kw.setdefault("timeout", 5.0)
    return GitHub("ghp_crashpoint", base_url=p.url, **kw)


def create(client: GitHub[Any], headers: dict[str, str] | None = None) -> Any:
    return client.rest.issues.create(
        "o", "r", headers=headers, title="Refund failed", body=BODY, labels=["bug"]
    )


def writes(p: ProviderProcess) -> list[Any]:
    return [a for a in p.client.arrivals() if a.kind == "write"]


def in_thread(fn: Any) -> Future[Any]:
    pool = ThreadPoolExecutor(1)
    future = pool.submit(fn)
    pool.shutdown(wait=False)
    return future


def test_issue_comment_and_search_by_marker(p: ProviderProcess) -> None:
    client = gh(p)
    first, second = create(client).parsed_data, create(client).parsed_data
    assert (first.number, second.number) == (1, 2)
    assert first.state == "open"
    assert first.labels[0].name == "bug"
    comment = client.rest.issues.create_comment("o", "r", 1, body=BODY).parsed_data
    assert comment.issue_url.endswith("/repos/o/r/issues/1")
    assert len(p.client.effects()) == 3  # no idempotency: every call is one more
    found = client.rest.search.issues_and_pull_requests(q=f"{MARKER} in:body repo:o/r")
    assert found.parsed_data.total_count == 2
    assert [i.number for i in found.parsed_data.items] == [2, 1]
    assert client.rest.issues.get("o", "r", 1).parsed_data.title == "Refund failed"
    lookups = [a for a in p.client.arrivals() if a.kind == "lookup"]
    assert [(a.job_id, a.client_marker, a.status) for a in lookups] == [(JOB, MARKER, 200)] * 2


def test_the_default_client_retries_a_5xx_but_not_a_reset(p: ProviderProcess) -> None:
    # auto_retry=True (the default) retries a 5xx after (n+1)**2 s, up to 3 times, and
    # never a connection error; max_retry=1 keeps this test to one wait of a second.
    retry = RetryChainDecision(RetryRateLimit(), RetryServerError(max_retry=1))
    p.client.arm(Fault("fail_before_commit", status=502))
    assert create(gh(p, auto_retry=retry)).status_code == 201
    p.client.arm(Fault("drop_after_commit"))
    with pytest.raises(RequestError) as caught:
        create(gh(p, auto_retry=retry))
    assert not isinstance(caught.value, RequestFailed)
    assert [w.status for w in writes(p)] == [502, 201, None]
    assert len(p.client.effects()) == 2


def test_a_5xx_without_retries_is_request_failed(p: ProviderProcess) -> None:
    p.client.arm(Fault("fail_before_commit", status=503))
    with pytest.raises(RequestFailed) as caught:
        create(gh(p))
    assert caught.value.response.status_code == 503
    assert caught.value.response.json()["message"] == "Service Unavailable"
    assert p.client.effects() == []


@pytest.mark.parametrize(
    ("action", "effects"), [("hold_before_commit", 0), ("hold_after_commit", 1)]
)
def test_a_held_create_dropped_is_a_request_error(
    p: ProviderProcess, action: str, effects: int
) -> None:
    fault = p.client.arm(Fault(action, job=JOB))
    future = in_thread(lambda: create(gh(p)))
    p.client.wait_held(fault, timeout_s=5)
    p.client.release(fault, "drop")
    with pytest.raises(RequestError):
        future.result(timeout=5)
    assert len(p.client.effects()) == effects
    assert len(writes(p)) == 1


def test_a_delay_past_the_timeout_is_request_timeout_only_without_the_cache(
    p: ProviderProcess,
) -> None:
    p.client.arm(Fault("delay_response", delay_s=1.5))
    with pytest.raises(RequestTimeout):
        create(gh(p, timeout=0.5))
    # With githubkit's default HTTP cache (hishel) the timeout is not applied: the call
    # waits the whole delay out and succeeds. A worker relying on timeouts must turn the
    # cache off.
    p.client.arm(Fault("delay_response", delay_s=1.0))
    start = time.monotonic()
    assert create(gh(p, timeout=0.5, http_cache=True)).status_code == 201
    assert time.monotonic() - start >= 1.0
    assert len(p.client.effects()) == 2


def test_429_is_a_secondary_rate_limit_and_auto_retry_waits_it_out(p: ProviderProcess) -> None:
    p.client.arm(Fault("fail_before_commit", status=429))
    with pytest.raises(SecondaryRateLimitExceeded) as caught:
        create(gh(p))
    assert caught.value.retry_after.total_seconds() == 1
    p.client.arm(Fault("fail_before_commit", status=429))
    assert create(gh(p, auto_retry=True)).status_code == 201
    assert [w.status for w in writes(p)] == [429, 429, 201]
    assert len(p.client.effects()) == 1


def test_business_errors_lookup_failure_and_identities(p: ProviderProcess) -> None:
    client = gh(p)
    with pytest.raises(RequestFailed) as caught:
        client.rest.issues.create("o", "r", title="no marker", body="plain text")
    assert caught.value.response.status_code == 422
    assert caught.value.response.json()["message"] == "Validation Failed"
    with pytest.raises(RequestFailed) as caught:
        client.rest.issues.get("o", "r", 99)
    assert caught.value.response.status_code == 404
    p.client.arm(Fault("fail_lookup"))
    with pytest.raises(RequestFailed) as caught:
        client.rest.search.issues_and_pull_requests(q=MARKER)
    assert caught.value.response.status_code == 503
    p.client.set_identity("acct-1", "expired")
    # githubkit takes extra headers per call, not per client.
    as_acct = {"X-Crashpoint-Identity": "acct-1"}
    with pytest.raises(RequestFailed) as caught:
        create(client, as_acct)
    assert caught.value.response.status_code == 401
    assert caught.value.response.json()["message"] == "Bad credentials"
    p.client.set_identity("acct-1", "changed", now_acts_as="acct-9")
    with pytest.raises(RequestFailed) as caught:
        create(client, as_acct)
    assert caught.value.response.status_code == 403
    assert p.client.effects() == []


def test_the_cached_client_still_reaches_the_provider_for_every_search(
    p: ProviderProcess,
) -> None:
    client = gh(p, http_cache=True)
    create(client)
    for _ in range(2):
        found = client.rest.search.issues_and_pull_requests(q=f"{MARKER} repo:o/r")
        assert found.parsed_data.total_count == 1
    assert len([a for a in p.client.arrivals() if a.kind == "lookup"]) == 2
