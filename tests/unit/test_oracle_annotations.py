"""tool_annotations: an MCP tool's declared hints held to the effects it made."""

from __future__ import annotations

from typing import Any

from fake_providers.tools import tool_path, tools_for
from harness.history import Event
from harness.oracle import WARNINGS, TrialFacts, warnings_of
from tests.unit.test_oracle import history, write

SEND = tool_path("send_message")
CREATE = tool_path("create_ticket")


def tools_event(kind: str, hints: dict[str, bool] | None = None) -> Event:
    tools = [t.to_json() for t in tools_for(kind, hints)]
    return Event(0.0, "provider:svc", "tools", fields={"tools": tools})


def facts(kind: str) -> TrialFacts:
    return TrialFacts(jobs=["j-1", "j-2"], provider_kinds={"svc": kind}, quiescent=True)


def message(t: float, job: str = "j-1", **kw: Any) -> Any:
    fields = {"path": SEND, "job_id": job, "idempotency_key": None, "client_marker": f"m-{job}"}
    return write(t, **{**fields, **kw})


def test_it_is_a_registered_warning() -> None:
    assert "tool_annotations" in WARNINGS


def test_a_plain_tool_that_claims_idempotence_and_sends_twice_is_a_finding() -> None:
    events = history([message(1.0), message(2.0)], tools_event("plain", {"idempotentHint": True}))
    [found] = warnings_of(events, facts("plain"))
    assert found.invariant == "tool_annotations"
    assert found.job == "j-1"
    assert "tool send_message at svc declares idempotentHint: true" in found.message
    assert "2 effects for the same arguments ('m-j-1'" in found.message
    assert len(found.evidence["effects"]) == 2
    assert 0 in found.events  # the tools event: what the tool declared


def test_the_honest_plain_tool_sending_twice_is_no_finding() -> None:
    events = history([message(1.0), message(2.0)], tools_event("plain"))
    assert warnings_of(events, facts("plain")) == []


def test_other_arguments_are_other_calls() -> None:
    hints = {"idempotentHint": True}
    events = history([message(1.0), message(2.0, "j-2")], tools_event("plain", hints))
    assert warnings_of(events, facts("plain")) == []
    other_payload = history(
        [message(1.0), message(2.0, fingerprint="f2")], tools_event("plain", hints)
    )
    assert warnings_of(other_payload, facts("plain")) == []


def test_a_replayed_keyed_write_is_one_effect() -> None:
    first = write(1.0, path=CREATE)
    replay = write(2.0, path=CREATE, committed=False, replayed=True)
    assert (
        warnings_of(history([first, replay], tools_event("idempotent")), facts("idempotent")) == []
    )


def test_a_read_only_tool_that_commits_is_a_finding() -> None:
    events = history([message(1.0)], tools_event("plain", {"readOnlyHint": True}))
    [found] = warnings_of(events, facts("plain"))
    assert "declares readOnlyHint: true but committed effect" in found.message


def test_http_writes_are_not_tools() -> None:
    # No tools event: the provider spoke HTTP; nothing was declared, nothing is judged.
    events = history([message(1.0, path="/v1/sends"), message(2.0, path="/v1/sends")])
    assert warnings_of(events, facts("plain")) == []
