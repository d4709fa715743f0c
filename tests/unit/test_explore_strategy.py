"""How often the strategy draws a failing provider past the target's declared cap."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given, settings

from harness.exploration.evaluation import Confirm, Outcome
from harness.exploration.search import Explorer
from harness.exploration.strategy import FEW_FAILURES, Space, schedules
from harness.schedule import MAX_COUNT, FaultStep, Schedule


def _drawn(space: Space, budget: int = 200, seed: int = 1) -> list[Schedule]:
    """The schedules a search over ``space`` generates, decided by a runner that always holds."""
    seen: list[Schedule] = []

    def run(s: Schedule, label: str) -> Outcome:
        seen.append(s)
        return Outcome("held")

    Explorer(run, space, budget=budget, seed=seed).explore()
    return seen


def _failing_writes(s: Schedule) -> list[FaultStep]:
    return [f for f in s.faults if f.action == "provider_fault" and f.fault == "fail_before_commit"]


@pytest.mark.parametrize("cap", [1, 2, 3, 7])
def test_failing_writes_are_below_the_declared_cap_or_fail_every_attempt_of_every_job(
    cap: int,
) -> None:
    drawn = _drawn(Space(max_attempts=cap))
    counts = [(f.times, s.jobs) for s in drawn for f in _failing_writes(s)]
    assert counts
    for times, jobs in counts:
        assert times < cap or times == min(cap * jobs, MAX_COUNT), (times, jobs)
    # The draw's whole point: most failing writes outlast every attempt the cap allows.
    past = sum(times >= cap * jobs for times, jobs in counts)
    assert past >= 0.6 * len(counts), counts


def test_the_count_past_the_cap_is_the_targets_own() -> None:
    # A target declaring 7 is failed 7 times per job, never 3 times (the reference's cap).
    drawn = _drawn(Space(max_attempts=7))
    counts = {f.times for s in drawn for f in _failing_writes(s) if s.jobs == 1}
    assert 7 in counts
    assert counts <= set(range(1, 8))


def test_without_a_declared_cap_every_fault_acts_on_a_few() -> None:
    drawn = _drawn(Space(max_attempts=None))
    counts = [f.times for s in drawn for f in s.faults if f.action == "provider_fault"]
    assert counts
    assert max(counts) <= FEW_FAILURES


@settings(max_examples=100, database=None)
@given(schedules(Space(max_attempts=40)))
def test_a_scaled_count_stays_within_the_schema(s: Schedule) -> None:
    assert all(1 <= f.times <= MAX_COUNT for f in s.faults)


def _retries_past_the_cap(s: Schedule, cap: int = 3) -> bool:
    """A planted bug like ``uncapped_retries``: it shows when the first fault fails the
    first writes, enough of them that one job of the schedule meets the cap whichever
    way they split (a fault after it would wait for its own boundary first)."""
    first = s.faults[0]
    return (
        first.action == "provider_fault"
        and first.fault == "fail_before_commit"
        and first.hit == 1
        and first.at in ("start", "after_claim", "before_external_call")
        and first.times >= (cap - 1) * s.jobs + 1
    )


def test_a_worker_retrying_past_its_cap_is_found_within_50() -> None:
    # Over seeds, as test_explore_search's rare kinds: with counts drawn uniformly from
    # 1 to cap + 2 this bug was found on 2 seeds of 10.
    space = Space(lease_ttl_s=0.3, http_timeout_s=0.3)
    needed = []
    for seed in range(1, 11):

        def run(s: Schedule, label: str) -> Outcome:
            bad = _retries_past_the_cap(s)
            return Outcome("violated" if bad else "held", ("bounded_retries",) if bad else ())

        found = Explorer(
            run, space, budget=50, seed=seed, confirm=Confirm(1, 1), first_only=True
        ).explore()
        needed.append(found.examples_needed)
        if found.finding is not None:
            shrunk = found.finding.schedule
            assert len(shrunk.faults) <= 3, shrunk.describe()
            # Shrunk to one job, the count comes down to the cap itself.
            assert (shrunk.jobs, shrunk.faults[0].times) == (1, 3), shrunk.describe()
    assert sum(n is not None for n in needed) >= 6, needed
    assert statistics.median(n or 51 for n in needed) <= 25, needed
