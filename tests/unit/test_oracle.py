"""The oracle on hand-made histories: each invariant fires on its bug and only on it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from fake_providers.models import Arrival, Effect
from harness.contract.vocabulary import INVARIANTS
from harness.history import Event
from harness.observe import arrival_event, commit_event
from harness.oracle import CHECKS, JobFinal, TrialFacts, Violation, check, unjudged

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
        t_mono=arrival.t_mono + 0.001,
        t_wall=arrival.t_wall,
    )


def claim(t: float, token: int, worker: str, job: str = "j-1") -> Event:
    fields = {"token": token, "worker": worker, "outcome": "ok"}
    return Event(t, f"worker:{worker}", "claim", job, token, fields)


def result(t: float, token: int, worker: str, *, accepted: bool, job: str = "j-1") -> Event:
    fields = {"token": token, "worker": worker, "accepted": accepted, "wrote": "succeeded"}
    return Event(t, f"worker:{worker}", "result_write", job, token, fields)


def signal(t: float) -> Event:
    return Event(t, "supervisor", "signal", fields={"worker": "w1", "signal": "SIGKILL"})


def history(arrivals: list[Arrival], *more: Event) -> list[Event]:
    """The events a trial records for these arrivals (committed writes commit), sorted."""
    events = [arrival_event(a) for a in arrivals]
    events += [commit_event(effect(a)) for a in arrivals if a.kind == "write" and a.committed]
    return sorted([*events, *more], key=lambda e: e.t)


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


def facts(kind: str = "idempotent", **kw: Any) -> TrialFacts:
    # A backoff is declared, short enough that no hand-made history is held to it.
    base: dict[str, Any] = {
        "jobs": ["j-1"],
        "provider_kinds": {"svc": kind},
        "max_attempts": 3,
        "min_backoff_s": 0.001,
    }
    base.update(kw)
    return TrialFacts(**base)


def run(
    arrivals: list[Arrival],
    *more: Event,
    kind: str = "idempotent",
    ledger: list[JobFinal] | None = None,
    **kw: Any,
) -> set[str]:
    found = check(history(arrivals, *more), facts(kind, job_states=ledger, **kw))
    return {v.invariant for v in found}


def test_every_invariant_of_the_vocabulary_has_a_check() -> None:
    assert set(CHECKS) == set(INVARIANTS)


# -- 1. no_duplicate_effect ---------------------------------------------------------------


def test_a_single_committed_write_holds() -> None:
    assert run([write(1.0)], ledger=[done()]) == set()


def test_two_effects_for_one_job_is_a_duplicate() -> None:
    found = run([write(1.0), write(2.0, idempotency_key="effect-j-1-b")])
    assert "no_duplicate_effect" in found
    assert "no_retry_while_unknown" in found
    assert "stable_key_and_payload" in found


def test_effects_of_two_jobs_are_no_duplicate() -> None:
    other = write(2.0, job_id="j-2", idempotency_key="effect-j-2")
    assert run([write(1.0), other], jobs=["j-1", "j-2"]) == set()


# -- 2. no_retry_while_unknown ------------------------------------------------------------


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


def test_a_ledger_reconcile_is_no_provider_lookup() -> None:
    first = write(1.0, status=None, committed=False, client_marker="m", idempotency_key=None)
    retry = write(3.0, client_marker="m", idempotency_key=None)
    noted = Event(2.0, "ledger", "reconcile", "j-1", 1, {"result": "confirmed", "outcome": "ok"})
    assert run([first, retry], noted, kind="plain") == {"no_retry_while_unknown"}


# -- 3. stable_key_and_payload ------------------------------------------------------------


def test_changed_payload_breaks_stable_key_and_payload() -> None:
    first = write(1.0, status=None, committed=False)
    second = write(2.0, fingerprint="f2", status=422, committed=False)
    assert run([first, second], quiescent=False) == {"stable_key_and_payload"}


def test_one_key_and_one_payload_hold() -> None:
    first = write(1.0, status=503, committed=False)
    second = write(2.0)
    assert run([first, second], ledger=[done()]) == set()


# -- 4. fenced_writes ---------------------------------------------------------------------


def test_accepted_result_under_a_stale_token_breaks_fencing() -> None:
    ledger = [
        claim(0.5, 1, "w1"),
        claim(1.5, 2, "w2"),
        result(2.0, 2, "w2", accepted=True),
        result(3.0, 1, "w1", accepted=True),
    ]
    assert run([write(1.0)], *ledger, ledger=[done()]) == {"fenced_writes"}


def test_rejected_stale_result_is_fine() -> None:
    ledger = [claim(0.5, 1, "w1"), claim(1.5, 2, "w2"), result(3.0, 1, "w1", accepted=False)]
    assert run([write(1.0)], *ledger, ledger=[done()]) == set()


def test_external_call_under_a_stale_token_breaks_fencing() -> None:
    late = write(2.0, fencing_token="1", committed=False, replayed=True)
    claims = [claim(0.5, 1, "w1"), claim(1.0, 2, "w2")]
    found = run([write(1.5, fencing_token="2"), late], *claims, ledger=[done()])
    assert found == {"fenced_writes"}


def test_without_claims_tokens_are_not_judged() -> None:
    late = write(2.0, fencing_token="1", committed=False, replayed=True)
    assert run([write(1.5, fencing_token="2"), late], ledger=[done()]) == set()


# -- 5. nothing_lost ----------------------------------------------------------------------


def test_acknowledged_without_effect_is_lost() -> None:
    assert run([], ledger=[done()]) == {"nothing_lost"}


def test_a_job_that_calls_two_providers_has_one_effect_at_each_and_holds() -> None:
    # A job routed to billing that also sends a receipt through the mailer: one effect at
    # each provider is exactly right, not "acknowledged with two effects".
    charge = write(1.0, provider="billing")
    receipt = write(1.1, provider="mailer", idempotency_key=None, client_marker="m-j-1")
    two = {"provider_kinds": {"billing": "idempotent", "mailer": "plain"}}
    routed = {"job_providers": {"j-1": "billing"}}
    assert run([charge, receipt], ledger=[done()], **two, **routed) == set()
    # Its own provider's effect missing is still a lost job, whatever the other one got.
    assert run([receipt], ledger=[done()], **two, **routed) == {"nothing_lost"}


def test_job_left_running_is_lost_only_at_quiescence() -> None:
    ledger = [done(delivery_state="leased", execution_state="running")]
    assert run([], ledger=ledger) == {"nothing_lost"}
    assert run([], ledger=ledger, quiescent=False) == set()


@pytest.mark.parametrize(
    "end",
    [{"needs_review": True, "delivery_state": "leased"}, {"delivery_state": "dead_lettered"}],
)
def test_review_and_dead_letter_are_accounted_ends(end: dict[str, Any]) -> None:
    assert run([], ledger=[done(**end)]) == set()


def test_without_job_states_nothing_lost_is_left_unjudged_and_said_so() -> None:
    # No effect may be a lost job or one a correct worker dead-lettered: not decided.
    assert run([]) == set()
    assert run([write(1.0)]) == set()
    claimed = [claim(0.5, 1, "w1")]
    notes = unjudged(claimed, facts(job_states=None))
    assert set(notes) == {"nothing_lost"}
    assert "declare [target] status" in notes["nothing_lost"]
    review = unjudged(claimed, facts(job_states=None, review_expected=frozenset({"j-1"})))
    assert "needs_review" in review["ambiguity_goes_to_review"]
    assert unjudged(claimed, facts(job_states=[done()])) == {}
    # Without claims in the history, stale tokens cannot be judged either.
    assert set(unjudged([], facts(job_states=[done()]))) == {"fenced_writes"}


def test_a_job_done_by_its_status_without_an_effect_is_lost() -> None:
    from harness.targets.config import JobStatus
    from harness.targets.status_line import job_final

    closed = job_final("j-1", JobStatus("done", attempts=1))
    assert run([], ledger=[closed]) == {"nothing_lost"}
    assert run([write(1.0)], ledger=[closed]) == set()
    # Dead-lettered or in review, a job may end with no effect; pending is no end.
    assert run([], ledger=[job_final("j-1", JobStatus("dead_lettered"))]) == set()
    assert run([], ledger=[job_final("j-1", JobStatus("needs_review"))]) == set()
    assert run([], ledger=[job_final("j-1", JobStatus("pending"))]) == {"nothing_lost"}
    assert run([], ledger=[job_final("j-1", JobStatus("pending"))], quiescent=False) == set()
    # A status without attempts bounds nothing by itself.
    assert run([write(1.0)], ledger=[job_final("j-1", JobStatus("done"))], max_attempts=1) == set()


def test_a_job_missing_from_the_ledger_is_lost() -> None:
    assert run([write(1.0)], ledger=[done("j-2")], jobs=["j-1", "j-2"]) == {"nothing_lost"}


# -- 6. bounded_retries -------------------------------------------------------------------


def test_too_many_writes_break_bounded_retries() -> None:
    writes = [write(float(i), status=503, committed=False) for i in range(4)]
    assert run(writes, max_attempts=3, quiescent=False) == {"bounded_retries"}
    assert run(writes[:3], max_attempts=3, quiescent=False) == set()


def test_the_workers_own_attempt_count_is_context_not_evidence() -> None:
    # A worker that counts claims reconciled an unknown write six times (its lookups
    # found the provider down) and sent the job to review: one write reached the
    # provider, so a cap of 6 writes held, whatever its counter says (7 claims).
    reconciled = done(attempts=7, delivery_state="dead_lettered", needs_review=True)
    lookups = [lookup(1.5 + i, status=503) for i in range(6)]
    assert run([write(1.0), *lookups], ledger=[reconciled], max_attempts=6) == set()
    # Six failed writes within the cap and a seventh claim that wrote nothing: held.
    failing = [write(float(i), status=503, committed=False) for i in range(6)]
    assert run(failing, ledger=[done(attempts=7)], max_attempts=6, quiescent=False) == set()


def test_a_writes_violation_shows_the_workers_count_beside_the_providers() -> None:
    writes = [write(float(i), status=503, committed=False) for i in range(4)]
    found = check(history(writes), facts(job_states=[done(attempts=4)], quiescent=False))
    (v,) = found
    assert v.message == "4 writes for j-1 reached svc; the maximum is 3"
    assert [row["attempts"] for row in v.evidence["ledger"]] == [4]
    assert len(v.evidence["arrivals"]) == 4
    # Without a ledger the evidence names the writes alone.
    (bare,) = check(history(writes), facts(quiescent=False))
    assert "ledger" not in bare.evidence


def test_no_declared_maximum_bounds_nothing() -> None:
    writes = [write(float(i), status=503, committed=False) for i in range(4)]
    assert run(writes, max_attempts=None, quiescent=False) == set()
    assert run(writes * 3, max_attempts=None) == set()
    assert "no max_attempts" in unjudged([], facts(max_attempts=None))["bounded_retries"]


def test_without_a_maximum_retries_must_stop_before_the_bound() -> None:
    writes = [write(float(i), status=503, committed=False) for i in range(4)]
    # The trial's bound ran out; its last quiet window began at 2.5: writes kept coming.
    found = check(history(writes), facts(max_attempts=None, quiescent=False, last_window_from=2.5))
    (v,) = found
    assert v.invariant == "bounded_retries"
    assert v.message.startswith("retries did not stop: 4 writes for j-1 reached svc, 1 of them")
    # Writes that stopped before the last window are a slow end, not endless retries.
    late = facts(max_attempts=None, quiescent=False, last_window_from=3.5)
    assert check(history(writes), late) == []
    # With a declared maximum, the maximum is what is checked.
    assert run(writes[:3], max_attempts=3, quiescent=False, last_window_from=0.5) == set()


# -- 7. ambiguity_goes_to_review ----------------------------------------------------------


def test_replaying_an_unknown_write_at_an_unqueryable_provider() -> None:
    first = write(1.0, status=None, client_marker="m", idempotency_key=None)
    again = write(2.0, client_marker="m", idempotency_key=None)
    assert "ambiguity_goes_to_review" in run([first, again], kind="unqueryable")


def test_retry_after_a_settled_error_at_an_unqueryable_provider_holds() -> None:
    failed = write(1.0, status=503, committed=False, client_marker="m", idempotency_key=None)
    again = write(2.0, client_marker="m", idempotency_key=None)
    assert run([failed, again], kind="unqueryable") == set()


def test_unprotectable_job_must_end_in_review() -> None:
    first = write(1.0, status=None, client_marker="m", idempotency_key=None)
    ok = [done(needs_review=True, delivery_state="leased")]
    review = frozenset({"j-1"})
    assert run([first], kind="unqueryable", ledger=ok, review_expected=review) == set()
    found = run([first], kind="unqueryable", ledger=[done()], review_expected=review)
    assert found == {"ambiguity_goes_to_review"}


# -- evidence -----------------------------------------------------------------------------


def only(found: list[Violation], invariant: str) -> Violation:
    [v] = [v for v in found if v.invariant == invariant]
    return v


def test_violations_point_at_the_events_they_were_decided_from() -> None:
    first, second = write(1.0), write(2.0)
    hold = Event(1.1, "provider:svc", "hold", "j-1", fields={"arrival": first.id})
    noise = Event(1.5, "worker:w1", "failpoint", "j-1", 1, {"point": "after_claim"})
    events = history([first, second], hold, signal(1.2), noise)
    v = only(check(events, facts()), "no_duplicate_effect")
    cited = [(events[i].kind, events[i].t) for i in v.events]
    assert cited == [
        ("arrival", 1.0),
        ("commit", 1.001),
        ("hold", 1.1),
        ("signal", 1.2),
        ("arrival", 2.0),
        ("commit", 2.001),
    ]
    assert v.evidence["events"] == v.events
    assert [e["arrival_id"] for e in v.evidence["effects"]] == [first.id, second.id]


def test_ledger_evidence_cites_the_rows_events() -> None:
    rows = [claim(0.5, 1, "w1"), claim(1.5, 2, "w2"), result(3.0, 1, "w1", accepted=True)]
    events = history([write(1.0)], *rows, result(2.5, 2, "w2", accepted=True))
    v = only(check(events, facts(job_states=[done()])), "fenced_writes")
    assert [(events[i].kind, events[i].source, events[i].t) for i in v.events] == [
        ("claim", "worker:w2", 1.5),
        ("result_write", "worker:w1", 3.0),
    ]
    assert v.evidence["ledger"] == [
        {"job_id": "j-1", "token": 1, "worker_id": "w1", "accepted": True, "t_mono": 3.0},
        {"job_id": "j-1", "token": 2, "worker_id": "w2", "t_mono": 1.5},
    ]


def test_an_arrival_event_without_its_fields_is_refused() -> None:
    bare = Event(1.0, "provider:svc", "arrival", "j-1", fields={"outcome": "ok", "arrival": 1})
    with pytest.raises(ValueError, match=r"event #0 .*does not carry a whole arrival"):
        check([bare], facts())


def test_an_acknowledged_job_has_one_effect_at_each_provider_it_calls() -> None:
    kinds = {"billing": "idempotent", "mailer": "plain"}
    both = [write(1.0, provider="billing"), write(1.2, provider="mailer", idempotency_key=None)]
    assert run(both, ledger=[done()], provider_kinds=kinds) == set()
    twice = [write(1.0, provider="billing"), write(1.2, provider="billing", fingerprint="f2")]
    assert "nothing_lost" in run(twice, ledger=[done()], provider_kinds=kinds)


def test_an_acknowledged_job_with_no_effect_at_a_provider_it_wrote_to_is_lost() -> None:
    kinds = {"billing": "idempotent", "mailer": "plain"}
    refused = write(1.2, provider="mailer", idempotency_key=None, status=503, committed=False)
    assert run(
        [write(1.0, provider="billing"), refused], ledger=[done()], provider_kinds=kinds
    ) == {"nothing_lost"}


# -- 8. resumes_at_missing_step -----------------------------------------------------------

#: A ticket at svc, then a notification at notify (the reference's multi-step job).
STEPS = {"j-1": (("ticket", "svc"), ("notify", "notify"))}
TWO = {"svc": "idempotent", "notify": "idempotent"}


def ticket(t: float, **kw: Any) -> Arrival:
    return write(t, idempotency_key="effect-j-1-ticket", **kw)


def notify(t: float, **kw: Any) -> Arrival:
    return write(t, provider="notify", idempotency_key="effect-j-1-notify", **kw)


def steps_run(arrivals: list[Arrival], *more: Event, **kw: Any) -> set[str]:
    kw.setdefault("ledger", [done()])
    return run(arrivals, *more, provider_kinds=TWO, job_steps=STEPS, **kw)


def test_a_crash_after_step_one_that_leads_to_step_two_only_holds() -> None:
    # The ticket took effect, the worker died with the answer in hand; its successor
    # looks the ticket up and sends only the missing notification.
    looked = lookup(2.0, idempotency_key="effect-j-1-ticket")
    assert steps_run([ticket(1.0), looked, notify(3.0)], signal(1.5)) == set()


def test_a_second_step_one_after_it_took_effect_is_caught_even_when_replayed() -> None:
    # Same key, so the provider replays it and nothing else notices: the worker rolled the
    # whole job back to its first step instead of resuming at the missing one.
    again = ticket(2.0, committed=False, replayed=True)
    found = steps_run([ticket(1.0), again, notify(3.0)], signal(1.5))
    assert found == {"resumes_at_missing_step"}


def test_the_violation_names_the_step_and_points_at_the_repeat() -> None:
    first, again = ticket(1.0), ticket(2.0, committed=False, replayed=True)
    events = history([first, again, notify(3.0)])
    found = check(events, facts(provider_kinds=TWO, job_steps=STEPS, job_states=[done()]))
    [v] = [v for v in found if v.invariant == "resumes_at_missing_step"]
    assert "step 'ticket'" in v.message
    assert v.evidence["arrivals"][0]["id"] == again.id
    assert events[v.events[-1]].kind in ("arrival", "commit")


def test_step_two_before_step_one_took_effect_is_out_of_order() -> None:
    failed = ticket(1.0, status=503, committed=False)
    found = steps_run([failed, notify(2.0)], ledger=[done(delivery_state="dead_lettered")])
    assert found == {"resumes_at_missing_step"}


def test_an_acknowledged_job_without_its_last_step_is_lost() -> None:
    assert "nothing_lost" in steps_run([ticket(1.0)])


def test_single_step_jobs_are_not_held_to_steps() -> None:
    # A second delivery under the same key after the commit is the provider's to absorb.
    again = write(2.0, committed=False, replayed=True)
    assert run([write(1.0), again], ledger=[done()]) == set()


def consumer_worker(t: float, worker: str, consumer: int = 2) -> Event:
    return Event(t, "supervisor", "note", fields={"worker": worker, "consumer": consumer})


def test_a_second_consumers_writes_are_judged_against_its_own_ledger_and_cap() -> None:
    # explore's shrunk false alarm on the reference worker: two refused writes, a third
    # held at arrival while the job is delivered to a second consumer with a ledger of its
    # own; its worker w2 claims token 1 there and writes once (the key protects it).
    first = [
        write(1.0, fencing_token="1", status=503, committed=False),
        write(2.0, fencing_token="2", status=503, committed=False),
        write(3.0, fencing_token="3"),
    ]
    duplicate = write(3.5, fencing_token="1", worker_id="w2", status=409, committed=False)
    claims = [claim(0.5, 1, "w1"), claim(1.5, 2, "w1"), claim(2.5, 3, "w1")]
    arrivals = [*first, duplicate]
    ledger = [done(attempts=3)]
    assert run(arrivals, *claims, consumer_worker(3.2, "w2"), ledger=ledger) == set()
    # Unmarked, w2 reads as a stale writer of the first ledger over its cap.
    assert run(arrivals, *claims, ledger=ledger) == {"fenced_writes", "bounded_retries"}
    # The second consumer is held to the cap on its own writes.
    more = [
        write(3.6 + i / 10, fencing_token="1", worker_id="w2", status=503, committed=False)
        for i in range(4)
    ]
    found = run([*first, *more], *claims, consumer_worker(3.2, "w2"), ledger=ledger)
    assert found == {"bounded_retries"}


def restore(t: float) -> Event:
    return Event(t, "supervisor", "restore", fields={"note": "state restored"})


def test_writes_after_a_ledger_restore_count_against_a_fresh_cap() -> None:
    # explore's false alarm on the correct examples: three refused writes used up the cap,
    # the ledger was put back to before the job ran, and the worker tried three times more.
    before = [write(1.0 + i, status=503, committed=False) for i in range(3)]
    after = [write(5.0 + i, status=503, committed=False) for i in range(2)] + [write(7.0)]
    assert run([*before, *after], restore(4.0), ledger=[done(attempts=3)]) == set()
    # Without the restore, the same six writes are three past the cap.
    assert run([*before, *after], ledger=[done(attempts=3)]) == {"bounded_retries"}
    # After the restore the worker is held to the cap again.
    more = [write(5.0 + i / 10, status=503, committed=False) for i in range(4)]
    found = check(history([*before, *more], restore(4.0)), facts(job_states=[done(attempts=3)]))
    [v] = [v for v in found if v.invariant == "bounded_retries"]
    assert "4 writes" in v.message
    assert "after ledger restore 1" in v.message
