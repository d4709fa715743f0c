"""Hypothesis strategies over fault schedules.

Hypothesis shrinks a list by dropping elements, an integer towards its lower bound and
``one_of`` towards its first branch, so the simplest fault (a kill at a failpoint) comes
first, the lower bounds are one job, one worker, the first hit; a shrunk finding is then
the fewest faults and jobs that still fail. Durations are multiples of the trial's lease
and client timeout, so one schedule means the same thing against any target.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import strategies as st

from harness.schedule import FAILPOINTS, MAX_COUNT, FaultStep, Schedule

#: Failpoints in the order shrinking prefers them (the plainest boundaries first), the
#: two around the external call drawn more often: most protocol bugs sit there.
_POINTS = (
    "before_external_call",
    "before_external_call",
    "after_external_call",
    "after_external_call",
    "after_external_call",
    "after_claim",
    "after_local_write",
    "before_reconcile",
    "after_reconcile",
)
assert set(_POINTS) == set(FAILPOINTS)
#: Hit counts, the first hit most often (a later one needs a retry to happen at all).
_HITS = (1, 1, 1, 2, 3)
_FIRST_HIT = st.just(1)
#: Provider faults armed when a write's answer is lost: its reconcile's lookup is the next
#: request, so a failing lookup first and most often; then the retry's write.
_PROVIDER_FAULTS = ("fail_before_commit", "fail_lookup", "delay_response")
_AFTER_LOST_RESPONSE = ("fail_lookup", "fail_lookup", "fail_before_commit", "delay_response")
#: Provider faults armed at once: a failing write most often (see the kinds below).
_AT_START = st.sampled_from(
    ("fail_before_commit", "fail_before_commit", "fail_lookup", "delay_response")
)
#: Without a declared cap nothing is past it: a provider fault acts on at most this many
#: requests, the harness's own few. More would only leave a correct worker that retries
#: without a cap still retrying when the trial's bound runs out.
FEW_FAILURES = 5


@dataclass(frozen=True)
class Space:
    """What the strategy may draw from: the target's provider kinds and timing."""

    providers: tuple[str, ...] = ("idempotent", "plain")
    lease_ttl_s: float = 0.6
    http_timeout_s: float = 0.6
    #: The most faults and jobs a schedule has; the most workers started at once.
    max_faults: int = 4
    max_jobs: int = 3
    max_workers: int = 2
    #: The target's retry cap (failing writes are drawn past it), None if it declares none.
    max_attempts: int | None = 3
    #: Toxics need Toxiproxy; a duplicate to a second consumer needs an idempotent provider.
    network: bool = False
    second_consumer: bool = True
    target: str = "reference"
    mutant: str | None = None


def fault_steps(space: Space, provider: str) -> st.SearchStrategy[FaultStep]:
    """One fault, simplest kinds first."""
    lease, timeout = space.lease_ttl_s, space.http_timeout_s
    points = st.sampled_from(_POINTS)
    hits = st.sampled_from(_HITS)
    twice = st.integers(1, 2)
    pause_s = st.sampled_from((round(lease * 3, 3), round(lease * 1.5, 3)))
    provider_faults = st.sampled_from(_PROVIDER_FAULTS)

    def provider_fault(
        at: st.SearchStrategy[str],
        faults: st.SearchStrategy[str] = provider_faults,
        hit: st.SearchStrategy[int] = _FIRST_HIT,
    ) -> st.SearchStrategy[FaultStep]:
        # One strategy per fault, built once: a flatmap that built them at every draw
        # spent most of a search's time constructing strategies, not drawing from them.
        by_fault = {
            fault: st.builds(
                FaultStep,
                at=at,
                action=st.just("provider_fault"),
                hit=hit,
                fault=st.just(fault),
                times=failure_counts(space, fault),
                delay_s=st.just(round(timeout * 2, 3)),
            )
            for fault in _PROVIDER_FAULTS
        }
        return faults.flatmap(by_fault.__getitem__)

    # (weight, kind): kills and stops at failpoints, provider faults and lost responses
    # are where most protocol bugs show.
    kinds: list[tuple[int, st.SearchStrategy[FaultStep]]] = [
        (
            5,
            st.builds(
                FaultStep,
                at=points,
                action=st.just("kill"),
                hit=hits,
                signal=st.sampled_from(("SIGKILL", "SIGTERM")),
            ),
        ),
        # At start a failing write drawn twice as often as the other two: at the cap, it
        # is the one fault that shows a worker retrying past its cap.
        (3, provider_fault(st.just("start"), _AT_START)),
        # A stop drawn a little more often than the provider faults: a stop before the call
        # is the only way to a stale token, and one kind of fault reaches it.
        (4, st.builds(FaultStep, at=points, action=st.just("pause"), hit=hits, duration_s=pause_s)),
        (
            1,
            st.builds(
                FaultStep,
                at=st.sampled_from(("arrival", "commit", "response")),
                action=st.just("kill"),
                hit=twice,
                signal=st.sampled_from(("SIGKILL", "SIGTERM")),
            ),
        ),
        (1, st.builds(FaultStep, at=st.just("settled"), action=st.just("restore"))),
        (1, provider_fault(points, hit=hits)),
        # A provider fault armed while a write is held. At "response" the write's answer
        # is lost as well, so the next request is the reconcile's lookup: a failing
        # lookup comes first and most often there.
        # Weight 3, and none armed at "commit": each weight taken here is taken from the
        # kinds a stop before the call and a conflicting retry need.
        (3, provider_fault(st.just("response"), st.sampled_from(_AFTER_LOST_RESPONSE), twice)),
        # At "response" the answer is lost whatever else happens: a pause of 0 s there
        # is the plain lost response (a reset after commit); at "commit" it is a stall.
        (
            2,
            st.builds(
                FaultStep,
                at=st.sampled_from(("response", "commit")),
                action=st.just("pause"),
                duration_s=st.sampled_from((0.0, round(lease * 1.5, 3), round(lease * 3, 3))),
            ),
        ),
    ]
    if provider == "idempotent" or not space.second_consumer:
        kinds.append((2, st.builds(FaultStep, at=st.just("arrival"), action=st.just("duplicate"))))
    if space.network:
        toxics = (
            ("timeout", {"timeout": 0}),
            ("reset_peer", {"timeout": 0}),
            ("latency", {"latency": int(timeout * 3000)}),
        )
        kinds.append(
            (
                1,
                st.sampled_from(toxics).map(
                    lambda t: FaultStep(
                        at="commit",
                        action="toxic",
                        toxic=t[0],
                        attributes=t[1],
                        duration_s=round(timeout * 1.5, 3),
                    )
                ),
            )
        )
    # Drawn by index, each kind as often as its weight: sampled_from shrinks towards
    # index 0, so the weights bias generation without changing what shrinking prefers.
    weighted = [i for i, (w, _) in enumerate(kinds) for _ in range(w)]
    return st.sampled_from(weighted).flatmap(lambda i: kinds[i][1])


def failure_counts(space: Space, fault: str) -> st.SearchStrategy[int]:
    """How many requests a provider fault acts on.

    A failing write is what the target's cap counts, so with a declared cap it is drawn
    below the cap (a bounded retry succeeds) or at the cap: one job's every attempt
    fails, and :func:`per_job` makes it every job's. A worker that retries past its cap
    shows only then. The other faults, and every fault of a target without a cap, act on
    a few.
    """
    cap = space.max_attempts
    if cap is None:
        return st.integers(1, FEW_FAILURES)
    if fault != "fail_before_commit":
        return st.integers(1, min(cap + 2, MAX_COUNT))
    if cap == 1:
        return st.just(cap)
    # By index, at the cap three times as often as below it (a retry with a new key or
    # payload shows at the cap too), and a shrunk count comes down to the ones below it.
    below, at_cap = st.integers(1, cap - 1), st.just(cap)
    return st.sampled_from((0, 1, 1, 1)).flatmap(lambda i: (below, at_cap)[i])


def per_job(schedule: Schedule, cap: int | None) -> Schedule:
    """Failing writes drawn at the cap fail every attempt of every job: ``cap * jobs``.

    The failures are not bound to a job; split between jobs, ``cap`` would leave each job
    under the cap. Scaled once the jobs are drawn (they are drawn after the faults, which
    keeps the other kinds' draws as they were), so a finding shrunk to one job fails
    ``cap`` writes.
    """
    if cap is None or schedule.jobs == 1:
        return schedule
    faults = tuple(
        replace(f, times=min(cap * schedule.jobs, MAX_COUNT))
        if f.action == "provider_fault" and f.fault == "fail_before_commit" and f.times == cap
        else f
        for f in schedule.faults
    )
    return replace(schedule, faults=faults)


def schedules(space: Space) -> st.SearchStrategy[Schedule]:
    """Schedules over ``space``: a provider kind, then jobs, workers and faults for it."""

    def for_provider(provider: str) -> st.SearchStrategy[Schedule]:
        return st.builds(
            Schedule,
            provider=st.just(provider),
            faults=st.lists(
                fault_steps(space, provider), min_size=1, max_size=space.max_faults
            ).map(tuple),
            jobs=st.integers(1, space.max_jobs),
            workers=st.integers(1, space.max_workers),
            target=st.just(space.target),
            mutant=st.just(space.mutant),
        ).map(lambda s: per_job(s, space.max_attempts))

    by_provider = {provider: for_provider(provider) for provider in space.providers}
    return st.sampled_from(space.providers).flatmap(by_provider.__getitem__)
