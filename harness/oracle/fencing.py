"""Invariant 4: lease tokens, judged from the ledger's claims and the providers' logs."""

from __future__ import annotations

from harness.oracle.evidence import Violation, violation
from harness.oracle.facts import Claim, Record, TrialFacts, token


def fenced_writes(record: Record, facts: TrialFacts) -> list[Violation]:
    """4. No result accepted, and no external call made, under a stale lease token."""
    if not record.claims:
        return []
    #: Job -> the highest token claimed: a call under it or above has no newer claim,
    #: which settles most calls of a long history without looking at their claims.
    top: dict[str, int] = {}
    for c in record.claims:
        if c.token > top.get(c.job_id, c.token - 1):
            top[c.job_id] = c.token
    #: Job -> its claims, indexed at the first call that needs them (few do).
    claims: dict[str, list[Claim]] = {}

    def newer_claim(job: str, token: int, t: float) -> Claim | None:
        if not claims:
            for c in record.claims:
                claims.setdefault(c.job_id, []).append(c)
        newer = [c for c in claims.get(job, []) if c.token > token and c.t_mono < t]
        return min(newer, key=lambda c: c.t_mono) if newer else None

    out = []
    for w in record.result_writes:
        if not w.accepted or top.get(w.job_id, w.token) <= w.token:
            continue
        stale_by = newer_claim(w.job_id, w.token, w.t_mono)
        if stale_by is not None:
            out.append(
                violation(
                    "fenced_writes",
                    w.job_id,
                    f"result write by {w.worker_id} under token {w.token} was accepted after "
                    f"{stale_by.worker_id} claimed token {stale_by.token}",
                    record,
                    ledger=[w, stale_by],
                )
            )
    for a in record.arrivals:
        if a.kind != "write" or a.job_id is None:
            continue
        sent_under = token(a)
        if sent_under is None:
            continue
        if top.get(a.job_id, sent_under) <= sent_under:
            continue
        if record.consumer(a.worker_id) != 1:
            continue  # a second consumer's token is from its own ledger, which is not read
        stale_by = newer_claim(a.job_id, sent_under, a.t_mono)
        if stale_by is not None:
            out.append(
                violation(
                    "fenced_writes",
                    a.job_id,
                    f"external call #{a.id} by {a.worker_id} under token {sent_under} reached "
                    f"{a.provider} after {stale_by.worker_id} claimed token {stale_by.token}",
                    record,
                    arrivals=[a],
                    ledger=[stale_by],
                )
            )
    return out
