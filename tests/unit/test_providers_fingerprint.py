"""Payload fingerprints: equal payloads agree, different payloads differ."""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from fake_providers.fingerprint import canonical_json, fingerprint

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
bodies = st.dictionaries(st.text(max_size=6), json_values, max_size=5)


def test_canonical_json_sorts_keys_and_drops_spaces() -> None:
    assert canonical_json({"b": 1, "a": [1, {"d": 2, "c": None}]}) == (
        b'{"a":[1,{"c":null,"d":2}],"b":1}'
    )


def test_fingerprint_is_sha256_of_canonical_json() -> None:
    body = {"job_id": "j-0001", "amount": 5}
    assert (
        fingerprint(body, kind="idempotent")
        == hashlib.sha256(b'{"amount":5,"job_id":"j-0001"}').hexdigest()
    )


def test_plain_kinds_ignore_the_client_marker() -> None:
    a = {"job_id": "j-1", "client_marker": "m-1"}
    b = {"job_id": "j-1", "client_marker": "m-2"}
    for kind in ("plain", "unqueryable"):
        assert fingerprint(a, kind=kind) == fingerprint(b, kind=kind)
        assert fingerprint(a, kind=kind) == fingerprint({"job_id": "j-1"}, kind=kind)


def test_idempotent_kind_keeps_the_client_marker() -> None:
    a = {"job_id": "j-1", "client_marker": "m-1"}
    b = {"job_id": "j-1", "client_marker": "m-2"}
    assert fingerprint(a, kind="idempotent") != fingerprint(b, kind="idempotent")


def test_a_timestamp_in_the_payload_changes_the_fingerprint() -> None:
    # The mutant "timestamp inside the fingerprinted payload" is caught only because of this.
    a = {"job_id": "j-1", "at": 1.0}
    assert fingerprint(a, kind="idempotent") != fingerprint({**a, "at": 2.0}, kind="idempotent")


@given(bodies)
def test_key_order_never_matters(body: dict[str, Any]) -> None:
    reordered = dict(reversed(list(body.items())))
    assert fingerprint(body, kind="idempotent") == fingerprint(reordered, kind="idempotent")


@given(bodies, bodies)
def test_different_bodies_give_different_fingerprints(a: dict[str, Any], b: dict[str, Any]) -> None:
    if canonical_json(a) != canonical_json(b):
        assert fingerprint(a, kind="idempotent") != fingerprint(b, kind="idempotent")
