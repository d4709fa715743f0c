"""Identity-bound jobs on real workers killed with real signals: a recovered worker that
finds its login expired or its profile changed stops; one that tries again is caught."""

from __future__ import annotations

import pytest
from trialkit import describe, events, run_cell

pytestmark = pytest.mark.process

POINTS = ("session_expired", "profile_changed")


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("provider", ["idempotent", "plain"])
def test_the_recovered_worker_stops_on_a_lost_identity(point: str, provider: str) -> None:
    r = run_cell("identity_lost_on_recovery", point, provider, "SIGKILL")
    assert r.verdict == "held", describe(r)
    assert r.reached
    assert "identity_bound" not in r.unjudged
    refused = [
        e for e in r.events if e["job"] == "j-0001" and e["fields"].get("status") in (401, 403)
    ]
    assert len(refused) == 1, describe(r)
    assert not events(r, "commit", job="j-0001"), describe(r)
    # The other job, bound to an identity still good, is done as usual.
    assert events(r, "commit", job="j-0002"), describe(r)


@pytest.mark.parametrize("point", POINTS)
def test_trying_once_more_anyway_is_caught_by_identity_bound(point: str) -> None:
    bad = run_cell(
        "identity_lost_on_recovery", point, "idempotent", "SIGKILL", mutant="identity_retry_anyway"
    )
    assert bad.verdict == "violated", describe(bad)
    assert "identity_bound" in {v.invariant for v in bad.violations}
