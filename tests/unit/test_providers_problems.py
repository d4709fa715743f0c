"""RFC 9457 problem documents: the only error shape a provider sends."""

from __future__ import annotations

import json

from fake_providers.problems import Problem, problem_body


def test_problem_body_fields() -> None:
    doc = json.loads(problem_body(409, "still in flight", instance="/v1/effects"))
    assert doc == {
        "type": "about:blank",
        "title": "Conflict",
        "status": 409,
        "detail": "still in flight",
        "instance": "/v1/effects",
    }


def test_title_defaults_to_the_reason_phrase_and_survives_odd_codes() -> None:
    assert Problem(415, "x").title == "Unsupported Media Type"
    assert Problem(599, "x").title == "Error"
    assert Problem(503, "x", title="Injected").title == "Injected"


def test_body_is_compact_and_has_no_instance_unless_given() -> None:
    body = Problem(400, "bad").body()
    assert b" " not in body.replace(b"Bad Request", b"")
    assert "instance" not in json.loads(body)
