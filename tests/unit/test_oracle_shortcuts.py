"""The oracle's shortcuts for long histories decide exactly as the plain rules do.

``nothing_lost``, ``no_duplicate_effect`` and ``fenced_writes`` settle most jobs of a
long history without counting them (one effect, the highest token). Here each is held,
on random small histories, to its rule written out with no shortcut at all.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness.history import Event
from harness.observe import arrival_event, commit_event
from harness.oracle import JobFinal, TrialFacts
from harness.oracle.facts import read
from harness.oracle.fencing import fenced_writes
from harness.oracle.liveness import nothing_lost
from harness.oracle.safety import no_duplicate_effect
from tests.unit.test_oracle import effect, write

JOBS = ("j-1", "j-2", "j-3")
PROVIDERS = ("a", "b")

# One job's doing: its writes (provider, committed, token), its claims, its result
# writes (token, accepted), its end state and where it was routed.
job_plan = st.fixed_dictionaries(
    {
        "writes": st.lists(
            st.tuples(st.sampled_from(PROVIDERS), st.booleans(), st.sampled_from(["1", "2", "x"])),
            max_size=3,
        ),
        # Effects whose write is not in the history (its arrival was not observed).
        "unseen": st.lists(st.sampled_from(PROVIDERS), max_size=2),
        "claims": st.lists(st.integers(1, 3), max_size=3),
        "results": st.lists(st.tuples(st.integers(1, 3), st.booleans()), max_size=2),
        "state": st.sampled_from(["acknowledged", "dead_lettered", "running", "missing"]),
        "routed": st.sampled_from([None, *PROVIDERS]),
    }
)


def history(
    plans: dict[str, dict[str, Any]], order: random.Random
) -> tuple[list[Event], TrialFacts]:
    # The jobs' events are mixed in a drawn order, so a claim may come before or after
    # a call under an older token.
    steps: list[tuple[str, str, Any]] = []
    for job, plan in plans.items():
        steps += [(job, "claim", token) for token in plan["claims"]]
        steps += [(job, "write", w) for w in plan["writes"]]
        steps += [(job, "result", r) for r in plan["results"]]
        steps += [(job, "unseen", provider) for provider in plan["unseen"]]
    order.shuffle(steps)
    events: list[Event] = []
    for n, (job, what, detail) in enumerate(steps):
        t = float(n)
        if what == "claim":
            events.append(Event(t, "worker:w1", "claim", job, 1, {"token": detail, "worker": "w1"}))
        elif what == "unseen":
            events.append(commit_event(effect(write(t, job_id=job, provider=detail))))
        elif what == "result":
            token, accepted = detail
            fields = {"token": token, "worker": "w1", "accepted": accepted}
            events.append(Event(t, "worker:w1", "result_write", job, 1, fields))
        else:
            provider, committed, token = detail
            a = write(t, job_id=job, provider=provider, committed=committed, fencing_token=token)
            events.append(arrival_event(a))
            if committed:
                events.append(commit_event(effect(a)))
    states = [
        JobFinal(job, plan["state"], "x", "x", False, None)
        for job, plan in plans.items()
        if plan["state"] != "missing"
    ]
    routed = {job: plan["routed"] for job, plan in plans.items() if plan["routed"]}
    facts = TrialFacts(
        jobs=list(plans),
        provider_kinds=dict.fromkeys(PROVIDERS, "idempotent"),
        job_states=states,
        job_providers=routed,
    )
    return events, facts


Trial = tuple[list[Event], TrialFacts]
trials = st.builds(
    history,
    st.dictionaries(st.sampled_from(JOBS), job_plan, min_size=1),
    st.randoms(use_true_random=False),
)


def plan(**kw: Any) -> dict[str, dict[str, Any]]:
    base: dict[str, Any] = {"writes": [], "unseen": [], "claims": [], "results": []}
    return {"j-1": base | {"state": "acknowledged", "routed": None} | kw}


# The shortcut's edges, each a lost job with one effect: written to at another provider
# only, or routed to another one (random draws find these rarely).
EDGES = (
    plan(writes=[("b", False, "1")], unseen=["a"]),
    plan(writes=[("a", True, "1")], routed="b"),
)


@settings(max_examples=300, deadline=None)
@given(trials)
@example(history(EDGES[0], random.Random(0)))
@example(history(EDGES[1], random.Random(0)))
def test_nothing_lost_shortcut_decides_as_the_full_count(trial: Trial) -> None:
    events, facts = trial
    record = read(events)
    lost = set()
    finals = {j.job_id: j for j in facts.job_states or ()}
    for job in facts.jobs:
        final = finals.get(job)
        if final is None:
            lost.add(job)
            continue
        per = Counter(e.provider for e in record.effects if e.job_id == job)
        owed = {a.provider for a in record.arrivals if a.job_id == job and a.kind == "write"}
        owed |= set(per)
        owed |= {facts.job_providers[job]} if job in facts.job_providers else set()
        wrong = any(per[provider] != 1 for provider in owed)
        if (final.delivery_state == "acknowledged" and (wrong or not owed)) or not final.final:
            lost.add(job)
    assert {v.job for v in nothing_lost(record, facts)} == lost


@settings(max_examples=300, deadline=None)
@given(trials)
def test_duplicates_shortcut_finds_every_job_counted_twice(trial: Trial) -> None:
    events, facts = trial
    record = read(events)
    counts = Counter((e.provider, e.job_id) for e in record.effects)
    twice = sorted(str(job) for (_, job), n in counts.items() if n > 1)
    assert sorted(str(v.job) for v in no_duplicate_effect(record, facts)) == twice


@settings(max_examples=300, deadline=None)
@given(trials)
def test_fencing_shortcut_finds_every_stale_token(trial: Trial) -> None:
    events, facts = trial
    record = read(events)

    def stale(job: str, token: int, t: float) -> bool:
        return any(c.job_id == job and c.token > token and c.t_mono < t for c in record.claims)

    expected = [
        w.job_id for w in record.result_writes if w.accepted and stale(w.job_id, w.token, w.t_mono)
    ]
    expected += [
        str(a.job_id)
        for a in record.arrivals
        if a.kind == "write"
        and a.fencing_token is not None
        and a.fencing_token.isdigit()
        and stale(str(a.job_id), int(a.fencing_token), a.t_mono)
    ]
    assert [v.job for v in fenced_writes(record, facts)] == expected
