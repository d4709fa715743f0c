"""A cell's hold at its own provider, and what a cell says it exercised (no sockets)."""

from __future__ import annotations

from typing import Any

from harness.history import Event
from harness.landing import exercised, landing
from harness.rendezvous import Holds
from harness.rendezvous_wire import parse_line
from harness.targets.command_output import refused_line


def test_a_provider_hold_lets_go_a_hit_that_names_another_provider() -> None:
    holds = Holds()
    gate = holds.arm("before_external_call", "j-1", None, 1, provider="mailer")
    assert holds.claim("before_external_call", "j-1", 1, "billing", "billing") is None
    assert holds.claim("before_external_call", "j-1", 1, "mailer", "mailer") is gate


def test_a_provider_hold_takes_a_line_that_names_none_as_before() -> None:
    # A single-step job's line names no step and no provider: it is the cell's own call.
    holds = Holds()
    gate = holds.arm("after_external_call", "j-1", None, 1, provider="billing")
    assert holds.claim("after_external_call", "j-1", 1) is gate


def test_the_line_may_name_its_provider() -> None:
    line = b'{"point": "before_external_call", "job": "j-1", "attempt": 1, "pid": 7, '
    msg = parse_line(line + b'"provider": "mailer"}')
    assert (msg.provider, msg.step) == ("mailer", None)
    assert parse_line(line[:-2] + b"}").provider is None


def ev(t: float, kind: str, source: str = "worker:w1", **fields: Any) -> Event:
    return Event(t=t, source=source, kind=kind, job="j-0001", fields=fields)


def arrival(t: float, provider: str) -> Event:
    return ev(t, "arrival", f"provider:{provider}", provider=provider)


def hit(t: float, point: str, **named: str) -> Event:
    return ev(t, "failpoint", point=point, held=True, **named)


def test_a_hit_that_named_the_cells_provider_landed_there() -> None:
    events = [arrival(1, "billing"), hit(2, "before_external_call", provider="mailer")]
    assert landing(events, provider="mailer", providers=2) is None


def test_an_unnamed_hit_after_another_providers_write_landed_there() -> None:
    events = [arrival(1, "billing"), hit(2, "after_external_call"), arrival(3, "mailer")]
    said = landing(events, provider="mailer", providers=2)
    assert said is not None
    assert said.startswith("reached at billing, not mailer")


def test_an_unnamed_hit_before_a_call_may_have_landed_elsewhere() -> None:
    events = [hit(1, "before_external_call"), arrival(2, "billing"), arrival(3, "mailer")]
    said = landing(events, provider="mailer", providers=2)
    assert said is not None
    assert "may have landed there, not at mailer" in said


def test_an_unnamed_hit_of_a_job_that_calls_one_provider_is_exact() -> None:
    events = [hit(1, "before_external_call"), arrival(2, "mailer")]
    assert landing(events, provider="mailer", providers=2) is None
    said = exercised(
        events,
        point="before_external_call",
        provider="mailer",
        providers=2,
        reached_by="failpoint",
        said=None,
    )
    assert said.endswith("(failpoint: exact)")


def test_a_drivers_word_wins() -> None:
    said = exercised(
        [], point="p", provider="billing", providers=1, reached_by=None, said="held: refused"
    )
    assert said == "held: refused"


def test_an_enqueue_says_it_refused_with_one_json_line() -> None:
    assert refused_line(b'queued j-1\n{"queued": false}\n')
    assert not refused_line(b'{"queued": true}\n')
    assert not refused_line(b"")
    assert not refused_line(b"false\n[1]\n")


def test_the_terminal_names_the_cells_that_did_not_exercise_what_they_name() -> None:
    from harness.commands.console import not_as_named

    trials = [
        {"id": "a", "exercised": "p at mailer: reached at that boundary (failpoint: exact)"},
        {"id": "b", "exercised": "reached at billing, not mailer: ..."},
        {"id": "c", "exercised": "not exercised: no worker took up ..."},
        {"id": "d", "exercised": "held: the queue refused the duplicate ..."},
        {"id": "e"},
    ]
    lines = not_as_named(trials)
    assert lines[0] == "2 cell(s) did not exercise what they name:"
    assert [line.split(":")[0].strip() for line in lines[1:]] == ["b", "c"]
