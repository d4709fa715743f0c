"""The network rows really act through Toxiproxy: lost responses, outages, slow ledgers."""

from __future__ import annotations

import pytest
from trialkit import describe, effects, events, lookups, run_cell, writes

pytestmark = [pytest.mark.process, pytest.mark.toxiproxy]


@pytest.mark.parametrize("point", ["toxic_latency", "toxic_timeout"])
def test_lost_response_is_unknown_then_confirmed(point: str) -> None:
    r = run_cell("ambiguous_timeout", point, "plain")
    assert r.verdict == "held", describe(r)
    on = events(r, "toxic_on", source="network")
    assert on, describe(r)
    first = writes(r)[0]
    assert first["fields"]["committed"]
    assert first["t"] < on[0]["t"] + 0.05  # the request got through; the toxic took the answer
    unknown = events(r, "result_write", job="j-0001", wrote="unknown", accepted=True)
    assert unknown, "the worker never lost sight of its call: " + describe(r)
    assert unknown[0]["t"] > on[0]["t"]
    assert len(writes(r)) == 1
    assert effects(r) == 1


def test_reset_after_commit_is_reconciled_not_resent() -> None:
    r = run_cell("reset_after_commit", "toxic_reset_peer", "plain")
    assert r.verdict == "held", describe(r)
    assert events(r, "toxic_on", type="reset_peer")
    assert events(r, "result_write", job="j-0001", wrote="unknown", accepted=True), describe(r)
    assert [e["fields"]["status"] for e in lookups(r)][-1] == 200
    assert len(writes(r)) == 1


def test_unqueryable_lost_response_goes_to_review() -> None:
    r = run_cell("reset_after_commit", "toxic_reset_peer", "unqueryable")
    assert r.verdict == "held", describe(r)
    assert len(writes(r)) == 1
    assert events(r, "result_write", job="j-0001", wrote="needs_review", accepted=True)


def test_provider_down_while_reconciling_writes_nothing_new() -> None:
    r = run_cell("provider_down_during_reconcile", "proxy_disabled", "plain")
    assert r.verdict == "held", describe(r)
    down = events(r, "toxic_on", toxic="down")
    up = events(r, "toxic_off", toxic="down")
    assert down
    assert up
    failed = [
        e
        for e in events(r, "reconcile", source="ledger", result="unavailable")
        if down[0]["t"] < e["t"] < up[0]["t"]
    ]
    assert failed, "no reconcile met the outage: " + describe(r)
    assert len(writes(r)) == 1
    assert [e["fields"]["status"] for e in lookups(r)] == [200]


@pytest.mark.postgres
def test_ledger_reset_after_the_call_is_recovered_by_reconcile(pg_dsn: str) -> None:
    r = run_cell("ledger_link_faults", "ledger_reset", "plain", ledger="postgres", pg_dsn=pg_dsn)
    assert r.verdict == "held", describe(r)
    assert events(r, "toxic_on", type="reset_peer")
    # The owner's result write died with its connection; a later claim reconciled.
    assert not events(r, "result_write", job="j-0001", token=1, accepted=True), describe(r)
    assert [e["fields"]["token"] for e in events(r, "claim", job="j-0001")][-1] >= 2
    assert len(writes(r)) == 1
    assert effects(r) == 1


@pytest.mark.postgres
def test_slow_lease_renewal_stops_before_calling_out(pg_dsn: str) -> None:
    r = run_cell(
        "slow_lease_renewal", "ledger_latency_past_lease", "plain", ledger="postgres", pg_dsn=pg_dsn
    )
    assert r.verdict == "held", describe(r)
    assert events(r, "toxic_on", type="latency")
    assert [e["fields"]["token"] for e in events(r, "claim", job="j-0001")] == [1, 2]
    # The one write carries the second claim's token. Which worker made that claim is a
    # race the product may win either way: the healthy peer, or the slowed owner itself
    # once its link is back, having dropped its stale claim first.
    assert [w["fields"]["token"] for w in writes(r)] == ["2"], describe(r)
    # The slowed owner found its lease gone at its next ledger step, before any call.
    assert events(r, "lease_expired", source="worker:w1"), describe(r)


@pytest.mark.postgres
def test_ledger_latency_leaves_one_effect(pg_dsn: str) -> None:
    r = run_cell("ledger_link_faults", "ledger_latency", "plain", ledger="postgres", pg_dsn=pg_dsn)
    assert r.verdict == "held", describe(r)
    assert len(events(r, "toxic_on", type="latency")) == 2
    assert effects(r) == 1
