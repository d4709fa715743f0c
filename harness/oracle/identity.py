"""Identity-bound actions: a job acts under its own identity, and only while it is good.

A job may name the identity it must act under (a browser profile, an account: its
body's ``identity``). Seed 000: "If a recovered worker finds a different profile or an
expired login, stop and mark the run unknown or blocked; do not try once more against an
unverified identity." Judged from the providers' arrivals, which record the identity each
request was made under (``X-Crashpoint-Identity``):

- no write for a job is made under an identity other than the job's;
- no write for a job is made under its identity after a provider refused that identity
  for the job (401: session expired, 403: profile changed), unless a later request under
  it was served (the identity was verified again).

A target that sends no identity header cannot be judged: :func:`unjudged_reason` says so
instead of raising a false alarm.
"""

from __future__ import annotations

from collections import defaultdict

from harness.contract.records import Arrival
from harness.oracle.evidence import Violation, violation
from harness.oracle.facts import Record, TrialFacts

NAME = "identity_bound"
#: What a provider answers under an identity it no longer accepts.
REFUSED = (401, 403)
_WHY = {401: "its session had expired (401)", 403: "its profile had changed (403)"}

NO_IDENTITY_HEADER = (
    "the jobs name an identity (body.identity) but the target sent no X-Crashpoint-Identity "
    "header with any request for them, so whose identity acted cannot be told; send it "
    "with every request for a job"
)


def identity_bound(record: Record, facts: TrialFacts) -> list[Violation]:
    """Every write for a job acts under the job's identity, never after it was refused."""
    if not record.job_identities:
        return []
    by_job: dict[str, list[Arrival]] = defaultdict(list)
    for a in sorted(record.arrivals, key=lambda a: a.t_mono):
        if (
            a.job_id is not None
            and a.job_id in record.job_identities
            and a.kind != "control_denied"
        ):
            by_job[a.job_id].append(a)
    out: list[Violation] = []
    for job, arrivals in by_job.items():
        own = record.job_identities[job]
        refused: Arrival | None = None
        for a in arrivals:
            if a.identity is None:
                continue
            if a.identity != own:
                if a.kind == "write":
                    out.append(_other(job, own, a, record))
                continue
            if a.status in REFUSED and not a.committed:
                refused = refused or a
                if a.kind == "write" and a is not refused:
                    out.append(_after_refusal(job, own, a, refused, record))
                continue
            if a.kind == "write" and refused is not None:
                out.append(_after_refusal(job, own, a, refused, record))
            elif a.status is not None and a.status < 500 and a.status not in REFUSED:
                refused = None  # served under it again: verified
    return out


def unjudged_reason(record: Record) -> str | None:
    """Why the invariant cannot be judged here: jobs name identities, requests none."""
    if not record.job_identities:
        return None
    carried = any(
        a.identity is not None for a in record.arrivals if a.job_id in record.job_identities
    )
    return None if carried else NO_IDENTITY_HEADER


def _other(job: str, own: str, a: Arrival, record: Record) -> Violation:
    return violation(
        NAME,
        job,
        f"write #{a.id} for {job} reached {a.provider} acting as {a.identity!r}; the job is "
        f"bound to {own!r} (a worker that found another identity must stop, not act as it)",
        record,
        arrivals=[a],
    )


def _after_refusal(job: str, own: str, a: Arrival, refused: Arrival, record: Record) -> Violation:
    why = _WHY.get(refused.status or 0, f"it was refused ({refused.status})")
    return violation(
        NAME,
        job,
        f"write #{a.id} for {job} went out under {own!r} after {refused.provider} refused "
        f"that identity (#{refused.id}: {why}): tried once more against an unverified identity",
        record,
        arrivals=[refused, a],
    )
