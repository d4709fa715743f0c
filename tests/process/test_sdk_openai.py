"""The unmodified ``openai`` SDK (3.60.0) against the openai persona: an agent's model
call, its tool round trip, re-plans of a retried job, and every fault as the SDK
surfaces it, checked against the provider's own arrivals (a plan is never an effect)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from fake_providers import Fault, ProviderProcess, start_provider
from fake_providers.models import Arrival

pytestmark = pytest.mark.process

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} for the job",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": True},
        },
    }
    for name in ("charge", "notify")
]


def job_doc(job: str) -> dict[str, Any]:
    return {
        "job_id": job,
        "charge": {"amount": 500, "currency": "usd", "customer": "cus_7"},
        "notify": {"channel": "C-billing", "text": f"charged for {job}"},
    }


def opening(job: str) -> list[Any]:
    return [
        {"role": "system", "content": "You run billing jobs with the tools given."},
        {"role": "user", "content": json.dumps(job_doc(job))},
    ]


@pytest.fixture(scope="module")
def p(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProviderProcess]:
    state: Path = tmp_path_factory.mktemp("openai") / "openai.db"
    with start_provider("openai", state_path=state) as proc:
        yield proc


@pytest.fixture(autouse=True)
def _clean(p: ProviderProcess) -> None:
    p.client.reset()


def sdk(p: ProviderProcess, **kw: Any) -> openai.OpenAI:
    kw.setdefault("max_retries", 0)
    kw.setdefault("timeout", 5.0)
    return openai.OpenAI(base_url=p.url + "/v1", api_key="x", **kw)


def plans(p: ProviderProcess, job: str) -> list[Arrival]:
    return [a for a in p.client.arrivals() if a.job_id == job]


def ask(client: openai.OpenAI, messages: list[Any]) -> Any:
    return client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)


def test_tool_round_trip_records_plans_and_no_effect(p: ProviderProcess) -> None:
    client, job = sdk(p), "j-1001"
    first = ask(client, opening(job))
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert [c.function.name for c in calls] == ["charge", "notify"]
    assert json.loads(calls[0].function.arguments) == job_doc(job)["charge"]
    assert first.usage is not None
    assert first._request_id == "req_" + first.id[-6:]

    # The agent performs the calls elsewhere, then sends their results back.
    messages = [*opening(job), choice.message.model_dump(exclude_none=True)]
    messages += [{"role": "tool", "tool_call_id": c.id, "content": '{"ok":true}'} for c in calls]
    final = ask(client, messages)
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content == f"Job {job} is done: called charge, notify."

    seen = plans(p, job)
    assert [(a.kind, a.status, a.committed, a.path) for a in seen] == [
        ("plan", 200, False, "/v1/chat/completions")
    ] * 2
    assert p.client.effects() == []


def test_same_job_asked_twice_gets_the_same_plan(p: ProviderProcess) -> None:
    client, job = sdk(p), "j-1002"
    one, two = ask(client, opening(job)), ask(client, opening(job))
    dump = [
        (c.id, c.function.name, c.function.arguments) for c in one.choices[0].message.tool_calls
    ]
    assert dump == [
        (c.id, c.function.name, c.function.arguments) for c in two.choices[0].message.tool_calls
    ]
    assert [a.fault for a in plans(p, job)] == [None, None]


def test_replan_changes_wording_and_argument_order_of_a_retried_job(p: ProviderProcess) -> None:
    client, job = sdk(p), "j-1003"
    p.client.arm(Fault("replan", job=job))
    # The first ask is no retry: the armed re-plan waits for the job's next ask.
    first = ask(client, opening(job)).choices[0].message.tool_calls
    again = ask(client, opening(job)).choices[0].message.tool_calls
    assert first[0].function.arguments == '{"amount":500,"currency":"usd","customer":"cus_7"}'
    assert again[0].function.arguments == '{"customer":"cus_7","currency":"usd","amount":500}'
    assert [json.loads(c.function.arguments) for c in again] == [
        json.loads(c.function.arguments) for c in first
    ]
    messages = [*opening(job), {"role": "assistant", "tool_calls": [c.model_dump() for c in again]}]
    messages += [{"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in again]
    final = ask(client, messages).choices[0].message.content
    assert final == f"Re-planned job {job} (re-plan 1) finished after calling charge, notify."
    assert [a.fault for a in plans(p, job)] == [None, "replan", None]
    # Consumed once: the third ask is the re-plan's plan again, not yet another one.
    third = ask(client, opening(job)).choices[0].message.tool_calls
    assert [c.function.arguments for c in third] == [c.function.arguments for c in first]


def test_replan_changed_moves_amount_and_recipient(p: ProviderProcess) -> None:
    client, job = sdk(p), "j-1004"
    ask(client, opening(job))
    p.client.arm(Fault("replan_changed", job=job))
    again = ask(client, opening(job)).choices[0].message.tool_calls
    assert json.loads(again[0].function.arguments) == {
        "customer": "cus_7-replanned",
        "currency": "usd",
        "amount": 501,
    }
    assert json.loads(again[1].function.arguments)["channel"] == "C-billing-replanned"
    assert p.client.effects() == []


def test_5xx_is_retried_by_the_sdk_twice_by_default(p: ProviderProcess) -> None:
    job = "j-1005"
    p.client.arm(Fault("fail_before_commit", job=job, times=3, status=503))
    with pytest.raises(openai.InternalServerError) as err:
        ask(sdk(p, max_retries=2), opening(job))
    assert err.value.status_code == 503
    assert isinstance(err.value.body, dict)
    assert err.value.body["type"] == "server_error"
    # One SDK call, three plan requests: the SDK's own retries reach the model.
    seen = plans(p, job)
    assert [(a.status, a.fault) for a in seen] == [(503, "fail_before_commit")] * 3

    p.client.arm(Fault("fail_before_commit", job="j-1006", times=3, status=500))
    with pytest.raises(openai.InternalServerError):
        ask(sdk(p, max_retries=0), opening("j-1006"))
    assert [a.status for a in plans(p, "j-1006")] == [500]


def test_429_is_a_rate_limit_error(p: ProviderProcess) -> None:
    job = "j-1007"
    p.client.arm(Fault("fail_before_commit", job=job, status=429))
    with pytest.raises(openai.RateLimitError) as err:
        ask(sdk(p), opening(job))
    assert isinstance(err.value.body, dict)
    assert err.value.body["code"] == "rate_limit_exceeded"
    # fail_lookup fails the model's answer too (default 503), for one request.
    p.client.arm(Fault("fail_lookup", job=job))
    with pytest.raises(openai.InternalServerError):
        ask(sdk(p), opening(job))
    assert [(a.status, a.fault) for a in plans(p, job)] == [
        (429, "fail_before_commit"),
        (503, "fail_lookup"),
    ]


def test_identity_expired_and_changed(p: ProviderProcess) -> None:
    client = sdk(p, default_headers={"X-Crashpoint-Identity": "acct-1"})
    p.client.set_identity("acct-1", "expired")
    with pytest.raises(openai.AuthenticationError) as err:
        ask(client, opening("j-1008"))
    assert isinstance(err.value.body, dict)
    assert err.value.body["code"] == "invalid_api_key"
    p.client.set_identity("acct-1", "changed", now_acts_as="acct-9")
    with pytest.raises(openai.PermissionDeniedError) as denied:
        ask(client, opening("j-1008"))
    assert denied.value.response.headers["x-crashpoint-identity"] == "acct-9"
    assert [(a.status, a.identity) for a in plans(p, "j-1008")] == [
        (401, "acct-1"),
        (403, "acct-1"),
    ]


def test_delay_past_the_timeout_is_an_api_timeout(p: ProviderProcess) -> None:
    job = "j-1009"
    p.client.arm(Fault("delay_response", job=job, delay_s=1.0))
    with pytest.raises(openai.APITimeoutError):
        ask(sdk(p, timeout=0.3), opening(job))
    deadline = time.monotonic() + 5
    while plans(p, job)[0].status is None and time.monotonic() < deadline:
        time.sleep(0.05)
    # The model did answer, late: the plan exists though the agent never read it.
    assert [(a.status, a.fault) for a in plans(p, job)] == [(200, "delay_response")]


def test_drop_is_a_connection_error_and_the_sdk_retries_it(p: ProviderProcess) -> None:
    job = "j-1010"
    p.client.arm(Fault("drop_after_commit", job=job))
    with pytest.raises(openai.APIConnectionError) as err:
        ask(sdk(p), opening(job))
    assert not isinstance(err.value, openai.APITimeoutError)
    p.client.arm(Fault("drop_after_commit", job=job))
    answer = ask(sdk(p, max_retries=1), opening(job))
    assert answer.choices[0].finish_reason == "tool_calls"
    assert [(a.status, a.fault) for a in plans(p, job)] == [
        (None, "drop_after_commit"),
        (None, "drop_after_commit"),
        (200, None),
    ]


def test_models_and_bad_requests(p: ProviderProcess) -> None:
    client = sdk(p)
    assert [m.id for m in client.models.list()] == ["crashpoint-planner"]
    assert client.models.retrieve("crashpoint-planner").owned_by == "crashpoint"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-9")
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello"}], tools=TOOLS
        )
    assert isinstance(err.value.body, dict)
    assert err.value.body["param"] == "messages"
    kinds = [(a.kind, a.path, a.job_id, a.status) for a in p.client.arrivals()[-4:]]
    assert kinds == [
        ("lookup", "/v1/models", None, 200),
        ("lookup", "/v1/models/crashpoint-planner", None, 200),
        ("lookup", "/v1/models/gpt-9", None, 404),
        ("plan", "/v1/chat/completions", None, 400),
    ]
