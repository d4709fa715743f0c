"""Key hygiene: a key or marker carrying a secret is a warning naming it, redacted."""

from __future__ import annotations

import pytest

from harness.observe import arrival_event
from harness.oracle import WARNINGS, TrialFacts, warnings_of
from harness.oracle.hygiene import NAME, redact
from harness.trial import sensitive_stand_in
from tests.unit.test_oracle import lookup, write


def _facts(**kw: object) -> TrialFacts:
    return TrialFacts(jobs=("j-1",), provider_kinds={"svc": "idempotent"}, **kw)  # type: ignore[arg-type]


def test_it_is_registered_as_a_warning() -> None:
    assert NAME in WARNINGS


@pytest.mark.parametrize(
    "key",
    [
        "effect-j-1",
        "cm-j-1",
        "effect-9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "effect-3fa85f64-5717-4562-b3fc-2c963f66afa6",
        "invoice-2026-12-01-j-1",
    ],
)
def test_keys_derived_from_the_job_are_silent(key: str) -> None:
    events = [arrival_event(write(1.0, idempotency_key=key))]
    assert warnings_of(events, _facts()) == []


def test_an_email_in_a_key_is_named_and_redacted() -> None:
    events = [arrival_event(write(1.0, idempotency_key="effect:alice.smith@example.com:j-1"))]
    (found,) = warnings_of(events, _facts())
    assert found.invariant == NAME
    assert found.job == "j-1"
    assert "email address" in found.message
    assert "alice.smith@example.com" not in found.message
    assert found.evidence["name"] == "effect:<email address:al…>:j-1"
    assert found.events == [0]


@pytest.mark.parametrize(
    "secret",
    [
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "AKIAIOSFODNN7EXAMPLE",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig",
        "Bearer abcdefgh12345678",
    ],
)
def test_token_shaped_strings_in_a_marker_are_flagged(secret: str) -> None:
    events = [arrival_event(write(1.0, idempotency_key=None, client_marker=f"cm-{secret}"))]
    (found,) = warnings_of(events, _facts())
    assert "token" in found.message
    assert found.message.startswith("marker ")
    assert secret not in found.message


def test_a_sensitive_fields_stand_in_is_flagged_by_its_field_name() -> None:
    value = sensitive_stand_in("account_number", "j-1")
    events = [arrival_event(write(1.0, idempotency_key=f"effect-{value}"))]
    (found,) = warnings_of(events, _facts(sensitive_values={value: "account_number"}))
    assert "the sensitive field account_number" in found.message
    assert value not in found.message


def test_a_sensitive_email_field_is_one_finding_not_two() -> None:
    value = sensitive_stand_in("customer_email", "j-1")
    assert "@" in value
    events = [arrival_event(write(1.0, idempotency_key=value))]
    (found,) = warnings_of(events, _facts(sensitive_values={value: "customer_email"}))
    assert found.evidence["found"] == ["customer_email"]


def test_one_warning_per_key_however_often_it_is_sent() -> None:
    key = "effect-bob@example.org"
    events = [
        arrival_event(write(1.0, idempotency_key=key)),
        arrival_event(write(2.0, idempotency_key=key)),
        arrival_event(lookup(3.0, idempotency_key=key)),
    ]
    assert len(warnings_of(events, _facts())) == 1


def test_redaction_keeps_what_surrounds_the_secret() -> None:
    assert redact("a-secret-b", [(2, 8, "token")]) == "a-<token>-b"
    assert redact("x-abcdefghij", [(2, 12, "token")]) == "x-<token:ab…>"


def test_a_message_id_is_not_an_address_but_an_address_inside_one_is() -> None:
    """An smtp provider's marker is the Message-ID, which has an address's shape."""
    quiet = write(1.0, idempotency_key=None, client_marker="<receipt-j-1@billing.example.com>")
    assert warnings_of([arrival_event(quiet)], _facts()) == []
    leaky = write(1.0, idempotency_key=None, client_marker="<alice@example.com.j-1@mail.example>")
    (found,) = warnings_of([arrival_event(leaky)], _facts())
    assert "email address" in found.message
    assert "alice@example.com" not in found.message
