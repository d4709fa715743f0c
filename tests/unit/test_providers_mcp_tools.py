"""The MCP endpoint of a provider, driven through ``ProviderApp.handle`` (no sockets).

Every tool call must be the kind's own write or lookup: the same arrivals, effects,
replays and faults as the HTTP API, under the tool's path.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_providers.app import ProviderApp
from fake_providers.models import Fault
from fake_providers.store import Store
from fake_providers.tools import HINTS, tool_path, tools_for

#: The revision the SDK's client speaks; its envelope travels in params._meta.
VERSION = "2026-07-28"


def make(tmp_path: Path, kind: str, **kw: Any) -> Iterator[ProviderApp]:
    store = Store(tmp_path / "p.db", provider="tickets")
    app = ProviderApp(kind=kind, name="tickets", store=store, transport="mcp", **kw)
    assert app.mcp is not None
    assert app.mcp.wait_loaded()
    yield app
    app.close()
    store.close()


@pytest.fixture
def tickets(tmp_path: Path) -> Iterator[ProviderApp]:
    yield from make(tmp_path, "idempotent")


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[ProviderApp]:
    yield from make(tmp_path, "plain")


def rpc(app: ProviderApp, method: str, params: dict[str, Any], **headers: str) -> Any:
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    h = {
        "host": "127.0.0.1:8000",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": VERSION,
        "mcp-method": method,
        **headers,
    }
    if method == "tools/call":
        h["mcp-name"] = params["name"]
    from fake_providers.messages import Request

    reply = app.handle(Request("POST", "/mcp", h, json.dumps(body).encode(), peer_pid=7))
    if reply.drop:
        return "dropped"
    assert reply.status == 200, reply.body
    return json.loads(reply.body)["result"]


def call(app: ProviderApp, tool: str, **arguments: Any) -> dict[str, Any]:
    result = rpc(app, "tools/call", {"name": tool, "arguments": arguments}, **{"x-worker-id": "w1"})
    if result == "dropped":
        return {"dropped": True}
    doc: dict[str, Any] = result["structuredContent"]
    assert result["isError"] == (doc["status"] >= 400)
    return doc


def test_each_kind_lists_its_tools_with_their_annotations(tmp_path: Path) -> None:
    for kind, names in (
        ("idempotent", ["create_ticket", "get_ticket"]),
        ("plain", ["send_message", "find_messages"]),
        ("unqueryable", ["send_message"]),
    ):
        sub = tmp_path / kind
        sub.mkdir()
        for app in make(sub, kind):
            listed = rpc(app, "tools/list", {})["tools"]
            assert [t["name"] for t in listed] == names
            by_name = {t["name"]: t["annotations"] for t in listed}
            write = by_name[names[0]]
            assert write["idempotentHint"] is (kind == "idempotent")
            assert write["destructiveHint"] is False
            assert write["readOnlyHint"] is False
            if len(names) > 1:
                assert by_name[names[1]]["readOnlyHint"] is True
            assert [t.name for t in app.tools] == names


def test_create_ticket_is_the_keyed_write_and_a_retry_replays(tickets: ProviderApp) -> None:
    first = call(tickets, "create_ticket", ticket={"job_id": "j-1", "n": 1}, idempotency_key="k1")
    again = call(tickets, "create_ticket", ticket={"job_id": "j-1", "n": 1}, idempotency_key="k1")
    assert first["status"] == 201
    assert not first["replayed"]
    assert again == {**first, "replayed": True}
    other = call(tickets, "create_ticket", ticket={"job_id": "j-1", "n": 2}, idempotency_key="k1")
    assert other["status"] == 422
    [effect] = tickets.store.effects()
    assert effect["idempotency_key"] == "k1"
    assert effect["job_id"] == "j-1"
    arrivals = tickets.store.arrivals()
    assert {a["path"] for a in arrivals} == {tool_path("create_ticket")}
    assert [a["replayed"] for a in arrivals] == [False, True, False]
    assert {(a["worker_id"], a["peer_pid"]) for a in arrivals} == {("w1", 7)}
    found = call(tickets, "get_ticket", idempotency_key="k1")
    assert found["body"]["state"] == "completed"
    assert tickets.store.arrivals()[-1]["kind"] == "lookup"
    assert call(tickets, "get_ticket", idempotency_key="nope")["status"] == 404


def test_a_missing_key_is_refused_by_the_tool_schema(tickets: ProviderApp) -> None:
    result = rpc(tickets, "tools/call", {"name": "create_ticket", "arguments": {"ticket": {}}})
    assert result["isError"] is True
    assert tickets.store.effects() == []


def test_send_message_is_the_plain_write_and_find_messages_its_lookup(chat: ProviderApp) -> None:
    msg = {"job_id": "j-1", "client_marker": "m-1", "text": "hi"}
    assert call(chat, "send_message", message=msg)["status"] == 201
    assert call(chat, "send_message", message=msg)["status"] == 201
    found = call(chat, "find_messages", client_marker="m-1")
    assert found["status"] == 200
    assert len(found["body"]) == 2
    no_marker = call(chat, "send_message", message={"job_id": "j-2"})
    assert no_marker["status"] == 422


def test_faults_act_on_tool_calls_as_on_http_writes(tickets: ProviderApp) -> None:
    tickets.board.arm(Fault("fail_before_commit", job="j-1", status=503))
    failed = call(tickets, "create_ticket", ticket={"job_id": "j-1"}, idempotency_key="k1")
    assert failed["status"] == 503
    assert tickets.store.effects() == []
    tickets.board.arm(Fault("drop_after_commit", job="j-2"))
    dropped = call(tickets, "create_ticket", ticket={"job_id": "j-2"}, idempotency_key="k2")
    assert dropped == {"dropped": True}
    [effect] = tickets.store.effects()
    assert effect["job_id"] == "j-2"
    last = tickets.store.arrivals()[-1]
    assert last["committed"]
    assert last["status"] is None
    assert last["fault"] == "drop_after_commit"


def test_a_held_tool_call_waits_for_the_harness(tickets: ProviderApp) -> None:
    fault_id = tickets.board.arm(Fault("hold_before_commit", job="j-1"))
    out: dict[str, Any] = {}
    t = threading.Thread(
        target=lambda: out.update(
            call(tickets, "create_ticket", ticket={"job_id": "j-1"}, idempotency_key="k1")
        )
    )
    t.start()
    held = tickets.board.wait_held(fault_id, timeout_s=10.0)
    assert held is not None
    assert held.idempotency_key == "k1"
    # In flight: the same key is refused meanwhile, as on the HTTP API.
    busy = call(tickets, "create_ticket", ticket={"job_id": "j-1"}, idempotency_key="k1")
    assert busy["status"] == 409
    assert tickets.store.effects() == []
    tickets.board.release(fault_id, "commit")
    t.join(10.0)
    assert out["status"] == 201
    assert len(tickets.store.effects()) == 1


def test_write_hints_override_the_declared_annotations(tmp_path: Path) -> None:
    for app in make(tmp_path, "plain", tool_hints={"idempotentHint": True}):
        listed = {t["name"]: t["annotations"] for t in rpc(app, "tools/list", {})["tools"]}
        assert listed["send_message"]["idempotentHint"] is True
        assert listed["find_messages"].get("idempotentHint") is None


def test_an_http_provider_answers_mcp_with_a_problem(tmp_path: Path) -> None:
    from fake_providers.messages import Request

    app = ProviderApp(kind="plain", name="p", store=Store(tmp_path / "p.db", provider="p"))
    reply = app.handle(Request("POST", "/mcp", {"content-type": "application/json"}, b"{}"))
    assert reply.status == 404
    assert b'transport = \\"mcp\\"' in reply.body
    assert app.tools == ()


def test_tools_for_every_kind_name_only_known_hints() -> None:
    for kind in ("idempotent", "plain", "unqueryable"):
        for spec in tools_for(kind):
            assert set(spec.annotations) <= set(HINTS)
    with pytest.raises(ValueError, match="no tools"):
        tools_for("stripe")
