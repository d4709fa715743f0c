"""The oracle on hand-made histories: each invariant fires on its bug and only on it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from fake_providers.models import Arrival, Effect
from harness.oracle import (
    Claim,
    JobFinal,
    LedgerFacts,
    OracleInput,
    ResultWrite,
    check,
)

_ids = itertools.count(1)


def write(t: float, **kw: Any) -> Arrival:
    base: dict[str, Any] = {
        "id": next(_ids),
        "t_mono": t,
        "t_wall": t,
        "provider": "svc",
        "kind": "write",
        "method": "POST",
        "path": "/v1/effects",
        "job_id": "j-1",
        "idempotency_key": "effect-j-1",
        "client_marker": None,
        "fingerprint": "f1",
        "fencing_token": "1",
        "worker_id": "w1",
        "peer_pid": None,
        "status": 201,
        "committed": True,
        "replayed": False,
        "effect_id": None,
        "fault": None,
    }
    base.update(kw)
    return Arrival(**base)


def lookup(t: float, status: int = 200, **kw: Any) -> Arrival:
    return write(t, kind="lookup", method="GET", status=status, committed=False, **kw)


def effect(arrival: Arrival) -> Effect:
    return Effect(
        id=arrival.id,
        provider=arrival.provider,
        job_id=arrival.job_id,
        idempotency_key=arrival.idempotency_key,
        client_marker=arrival.client_marker,
        fingerprint=arrival.fingerprint or "",
        arrival_id=arrival.id,
        t_mono=arrival.t_mono,
        t_wall=arrival.t_wall,
    )


def done(job: str = "j-1", **kw: Any) -> JobFinal:
    base: dict[str, Any] = {
        "job_id": job,
        "delivery_state": "acknowledged",
        "execution_state": "succeeded",
        "side_effect_state": "confirmed",
        "needs_review": False,
        "attempts": 1,
    }
    base.update(kw)
    return JobFinal(**base)


def run(
    arrivals: list[Arrival],
    *,
    kind: str = "idempotent",
    ledger: LedgerFacts | None = None,
    **kw: Any,
) -> set[str]:
    effects = [effect(a) for a in arrivals if a.kind == "write" and a.committed]
    data = OracleInput(
        jobs=["j-1"],
        provider_kinds={"svc": kind},
        arrivals=arrivals,
        effects=effects,
        ledger=ledger,
        **kw,
    )
    return {v.invariant for v in check(data)}


def test_a_single_committed_write_holds() -> None:
    assert run([write(1.0)], ledger=LedgerFacts(jobs=[done()])) == set()


def test_two_effects_for_one_job_is_a_duplicate() -> None:
    found = run([write(1.0), write(2.0, idempotency_key="effect-j-1-b")])
    assert "no_duplicate_effect" in found
    assert "no_retry_while_unknown" in found
    assert "stable_key_and_payload" in found


def test_idempotent_retry_with_the_same_key_is_covered() -> None:
    first = write(1.0, status=None)  # committed, response never sent
    replay = write(2.0, committed=False, replayed=True)
    assert run([first, replay]) == set()


def test_retry_after_a_settled_5xx_needs_no_cover() -> None:
    failed = write(1.0, status=503, committed=False, client_marker="m", idempotency_key=None)
    retry = write(2.0, client_marker="m", idempotency_key=None)
    assert run([failed, retry], kind="plain") == set()


def test_plain_retry_needs_a_successful_lookup_between() -> None:
    first = write(1.0, status=None, committed=False, client_marker="m", idempotency_key=None)
    retry = write(3.0, client_marker="m", idempotency_key=None)
    assert run([first, retry], kind="plain") == {"no_retry_while_unknown"}
    covered = [first, lookup(2.0, client_marker="m", idempotency_key=None), retry]
    assert run(covered, kind="plain") == set()


def test_a_failed_lookup_does_not_cover_a_retry() -> None:
    first = write(1.0, status=None, client_marker="m", idempotency_key=None)
    failed_lookup = lookup(2.0, status=503, client_marker="m", idempotency_key=None)
    retry = write(3.0, client_marker="m", idempotency_key=None)
    found = run([first, failed_lookup, retry], kind="plain")
    assert found == {"no_retry_while_unknown", "no_duplicate_effect"}


def test_changed_payload_breaks_stable_key_and_payload() -> None:
    first = write(1.0, status=None, committed=False)
    second = write(2.0, fingerprint="f2", status=422, committed=False)
    assert run([first, second], quiescent=False) == {"stable_key_and_payload"}


def test_accepted_result_under_a_stale_token_breaks_fencing() -> None:
    ledger = LedgerFacts(
        jobs=[done()],
        claims=[Claim("j-1", 1, "w1", 0.5), Claim("j-1", 2, "w2", 1.5)],
        result_writes=[
            ResultWrite("j-1", 2, "w2", True, 2.0),
            ResultWrite("j-1", 1, "w1", True, 3.0),
        ],
    )
    assert run([write(1.0)], ledger=ledger) == {"fenced_writes"}


def test_rejected_stale_result_is_fine() -> None:
    ledger = LedgerFacts(
        jobs=[done()],
        claims=[Claim("j-1", 1, "w1", 0.5), Claim("j-1", 2, "w2", 1.5)],
        result_writes=[ResultWrite("j-1", 1, "w1", False, 3.0)],
    )
    assert run([write(1.0)], ledger=ledger) == set()


def test_external_call_under_a_stale_token_breaks_fencing() -> None:
    ledger = LedgerFacts(
        jobs=[done()],
        claims=[Claim("j-1", 1, "w1", 0.5), Claim("j-1", 2, "w2", 1.0)],
    )
    late = write(2.0, fencing_token="1", committed=False, replayed=True)
    assert run([write(1.5, fencing_token="2"), late], ledger=ledger) == {"fenced_writes"}


def test_acknowledged_without_effect_is_lost() -> None:
    ledger = LedgerFacts(jobs=[done()])
    assert run([], ledger=ledger) == {"nothing_lost"}


def test_job_left_running_is_lost_only_at_quiescence() -> None:
    ledger = LedgerFacts(jobs=[done(delivery_state="leased", execution_state="running")])
    assert run([], ledger=ledger) == {"nothing_lost"}
    assert run([], ledger=ledger, quiescent=False) == set()


@pytest.mark.parametrize(
    "end",
    [{"needs_review": True, "delivery_state": "leased"}, {"delivery_state": "dead_lettered"}],
)
def test_review_and_dead_letter_are_accounted_ends(end: dict[str, Any]) -> None:
    ledger = LedgerFacts(jobs=[done(**end)])
    assert run([], ledger=ledger) == set()


def test_too_many_writes_break_bounded_retries() -> None:
    writes = [write(float(i), status=503, committed=False) for i in range(4)]
    assert run(writes, max_attempts=3, quiescent=False) == {"bounded_retries"}
    assert run(writes[:3], max_attempts=3, quiescent=False) == set()


def test_replaying_an_unknown_write_at_an_unqueryable_provider() -> None:
    first = write(1.0, status=None, client_marker="m", idempotency_key=None)
    again = write(2.0, client_marker="m", idempotency_key=None)
    assert "ambiguity_goes_to_review" in run([first, again], kind="unqueryable")


def test_unprotectable_job_must_end_in_review() -> None:
    first = write(1.0, status=None, client_marker="m", idempotency_key=None)
    ok = LedgerFacts(jobs=[done(needs_review=True, delivery_state="leased")])
    bad = LedgerFacts(jobs=[done()])
    review = frozenset({"j-1"})
    assert run([first], kind="unqueryable", ledger=ok, review_expected=review) == set()
    found = run([first], kind="unqueryable", ledger=bad, review_expected=review)
    assert found == {"ambiguity_goes_to_review"}
