"""The openai persona without sockets: the scripting convention, the response and error
shapes the SDK parses, plan arrivals (never effects, never reconciles) and re-plans."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_providers.app import ProviderApp, Reply, Request
from fake_providers.faults import FaultBoard
from fake_providers.models import Arrival, Fault
from fake_providers.store import Store
from harness.observe import arrival_event

JSON = {"content-type": "application/json"}
TOOLS = [{"type": "function", "function": {"name": n}} for n in ("charge", "notify")]
JOB = {
    "job_id": "j-0001",
    "charge": {"amount": 500, "currency": "usd", "customer": "cus_1"},
    "notify": {"channel": "C1", "text": "paid"},
}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[ProviderApp]:
    store = Store(tmp_path / "openai.db", provider="openai")
    board = FaultBoard(hold_max_s=30.0)
    yield ProviderApp(kind="openai", name="openai", store=store, board=board)
    board.close()
    store.close()


def chat(app: ProviderApp, messages: list[Any], *, tools: Any = TOOLS, **headers: str) -> Reply:
    body: dict[str, Any] = {"model": "gpt-4o-mini", "messages": messages}
    if tools is not None:
        body["tools"] = tools
    raw = json.dumps(body).encode()
    return app.handle(Request("POST", "/v1/chat/completions", {**JSON, **headers}, raw))


def user(doc: Any) -> list[Any]:
    return [{"role": "user", "content": doc if isinstance(doc, str) else json.dumps(doc)}]


def calls(reply: Reply) -> list[tuple[str, str]]:
    msg = json.loads(reply.body)["choices"][0]["message"]
    return [(c["function"]["name"], c["function"]["arguments"]) for c in msg["tool_calls"]]


def results_for(reply: Reply, messages: list[Any]) -> list[Any]:
    msg = json.loads(reply.body)["choices"][0]["message"]
    tool = [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in msg["tool_calls"]]
    return [*messages, msg, *tool]


def arrivals(app: ProviderApp) -> list[dict[str, Any]]:
    return app.store.arrivals()


def error(reply: Reply) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(reply.body)["error"]
    return body


def test_tool_calls_follow_the_declared_tools_and_the_job_fields(app: ProviderApp) -> None:
    reply = chat(app, user(JOB))
    doc = json.loads(reply.body)
    assert reply.status == 200
    assert doc["object"] == "chat.completion"
    assert doc["model"] == "gpt-4o-mini"
    assert set(doc["usage"]) >= {"prompt_tokens", "total_tokens"}
    choice = doc["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert calls(reply) == [
        ("charge", '{"amount":500,"currency":"usd","customer":"cus_1"}'),
        ("notify", '{"channel":"C1","text":"paid"}'),
    ]
    # Only declared tools are called, in the order declared.
    only = chat(app, user(JOB), tools=[TOOLS[1]])
    assert [n for n, _ in calls(only)] == ["notify"]


def test_results_for_every_call_close_with_text(app: ProviderApp) -> None:
    first = chat(app, user(JOB))
    final = chat(app, results_for(first, user(JOB)))
    choice = json.loads(final.body)["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["content"] == "Job j-0001 is done: called charge, notify."
    assert [(a["kind"], a["job_id"], a["status"]) for a in arrivals(app)] == [
        ("plan", "j-0001", 200)
    ] * 2
    assert app.store.effects() == []


def test_a_missing_tool_result_is_refused_as_openai_does(app: ProviderApp) -> None:
    first = chat(app, user(JOB))
    messages = results_for(first, user(JOB))[:-1]
    reply = chat(app, messages)
    assert reply.status == 400
    assert "tool_call_id" in error(reply)["message"]


def test_plan_list_harness_envelope_and_free_text_job_ids(app: ProviderApp) -> None:
    plan = {"job_id": "j-0002", "plan": [{"tool": "notify", "arguments": {"text": "hi"}}]}
    envelope = {"job_id": "j-0002", "provider": "openai", "body": plan}
    assert calls(chat(app, user(envelope))) == [("notify", '{"text":"hi"}')]
    prose = chat(app, user(f"Please run this job: {json.dumps(plan)} thanks"))
    assert calls(prose) == [("notify", '{"text":"hi"}')]
    # Only an id: nothing to call, the model says so.
    text = chat(app, user("what about j-0003?"))
    assert json.loads(text.body)["choices"][0]["finish_reason"] == "stop"
    assert arrivals(app)[-1]["job_id"] == "j-0003"


def test_a_planned_tool_that_is_not_declared_is_a_bad_request(app: ProviderApp) -> None:
    plan = {"job_id": "j-0002", "plan": [{"tool": "refund", "arguments": {}}]}
    reply = chat(app, user(plan))
    assert reply.status == 400
    assert error(reply)["param"] == "tools"
    assert "refund" in error(reply)["message"]


@pytest.mark.parametrize(
    ("messages", "param"),
    [([], "messages"), ([{"role": "user", "content": "no id here"}], "messages")],
)
def test_requests_without_a_job_are_bad_requests(
    app: ProviderApp, messages: list[Any], param: str
) -> None:
    reply = chat(app, messages)
    assert reply.status == 400
    assert error(reply)["param"] == param
    assert error(reply)["type"] == "invalid_request_error"
    assert arrivals(app)[-1]["kind"] == "plan"
    assert arrivals(app)[-1]["status"] == 400


def test_streaming_and_non_json_are_refused(app: ProviderApp) -> None:
    raw = json.dumps({"model": "m", "messages": user(JOB), "stream": True}).encode()
    reply = app.handle(Request("POST", "/v1/chat/completions", JSON, raw))
    assert reply.status == 400
    assert error(reply)["param"] == "stream"
    bad = app.handle(Request("POST", "/v1/chat/completions", JSON, b"{"))
    assert bad.status == 400
    assert "JSON" in error(bad)["message"]


def test_replan_acts_on_the_jobs_next_opening_ask_only(app: ProviderApp) -> None:
    app.board.arm(Fault("replan", job="j-0001", times=2))
    first = chat(app, user(JOB))
    # The continuation of the first plan is no retry: the re-plan waits.
    chat(app, results_for(first, user(JOB)))
    again = chat(app, user(JOB))
    assert calls(again) == [
        ("charge", '{"customer":"cus_1","currency":"usd","amount":500}'),
        ("notify", '{"text":"paid","channel":"C1"}'),
    ]
    final = chat(app, results_for(again, user(JOB)))
    text = json.loads(final.body)["choices"][0]["message"]["content"]
    assert text == "Re-planned job j-0001 (re-plan 1) finished after calling charge, notify."
    third = chat(app, results_for(chat(app, user(JOB)), user(JOB)))
    assert "(re-plan 2)" in json.loads(third.body)["choices"][0]["message"]["content"]
    assert [a["fault"] for a in arrivals(app)] == [None, None, "replan", None, "replan", None]


def test_replan_changed_moves_amount_and_recipients(app: ProviderApp) -> None:
    chat(app, user(JOB))
    app.board.arm(Fault("replan_changed", job="j-0001"))
    assert calls(chat(app, user(JOB))) == [
        ("charge", '{"customer":"cus_1-replanned","currency":"usd","amount":501}'),
        ("notify", '{"text":"paid","channel":"C1-replanned"}'),
    ]


def test_a_replan_armed_for_another_job_changes_nothing(app: ProviderApp) -> None:
    chat(app, user(JOB))
    app.board.arm(Fault("replan", job="j-0009"))
    assert calls(chat(app, user(JOB))) == calls(chat(app, user(JOB)))


@pytest.mark.parametrize(
    ("action", "status", "kind", "code"),
    [
        ("fail_before_commit", 503, "server_error", "server_error"),
        ("fail_before_commit", 429, "requests", "rate_limit_exceeded"),
        ("fail_lookup", 500, "server_error", "server_error"),
    ],
)
def test_failures_in_openais_envelope(
    app: ProviderApp, action: str, status: int, kind: str, code: str
) -> None:
    app.board.arm(Fault(action, job="j-0001", status=status))
    reply = chat(app, user(JOB))
    assert reply.status == status
    assert (error(reply)["type"], error(reply)["code"]) == (kind, code)
    assert (arrivals(app)[-1]["status"], arrivals(app)[-1]["fault"]) == (status, action)
    assert chat(app, user(JOB)).status == 200  # once


def test_identities_refuse_before_anything(app: ProviderApp) -> None:
    app.identities.set("acct-1", "expired")
    reply = chat(app, user(JOB), **{"x-crashpoint-identity": "acct-1"})
    assert reply.status == 401
    assert error(reply)["code"] == "invalid_api_key"
    app.identities.set("acct-1", "changed", now_acts_as="acct-2")
    reply = chat(app, user(JOB), **{"x-crashpoint-identity": "acct-1"})
    assert reply.status == 403
    assert ("X-Crashpoint-Identity", "acct-2") in reply.headers
    assert [a["status"] for a in arrivals(app)] == [401, 403]


def test_drop_and_delay(app: ProviderApp) -> None:
    app.board.arm(Fault("drop_after_commit", job="j-0001"))
    assert chat(app, user(JOB)).drop
    app.board.arm(Fault("delay_response", job="j-0001", delay_s=0.0))
    assert chat(app, user(JOB)).status == 200
    assert [(a["status"], a["fault"]) for a in arrivals(app)] == [
        (None, "drop_after_commit"),
        (200, "delay_response"),
    ]


def test_models_are_lookups_of_no_job(app: ProviderApp) -> None:
    listed = app.handle(Request("GET", "/v1/models"))
    assert json.loads(listed.body)["data"][0]["id"] == "crashpoint-planner"
    missing = app.handle(Request("GET", "/v1/models/gpt-9"))
    assert missing.status == 404
    assert error(missing)["type"] == "invalid_request_error"
    assert [(a["kind"], a["job_id"]) for a in arrivals(app)] == [("lookup", None)] * 2


def test_unknown_routes_and_methods(app: ProviderApp) -> None:
    assert app.handle(Request("POST", "/v1/responses", JSON, b"{}")).status == 404
    wrong = app.handle(Request("GET", "/v1/chat/completions"))
    assert wrong.status == 405
    assert ("Allow", "POST") in wrong.headers


def test_a_plan_is_a_plan_event_never_a_reconcile(app: ProviderApp) -> None:
    chat(app, user(JOB))
    event = arrival_event(Arrival.from_json(arrivals(app)[0]))
    assert (event.kind, event.job, event.fields["outcome"]) == ("plan", "j-0001", "ok")
