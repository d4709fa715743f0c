"""Invariant 4: lease tokens, judged from the ledger's claims and the providers' logs."""

from __future__ import annotations

from harness.oracle.evidence import Violation, violation
from harness.oracle.facts import Claim, Record, TrialFacts, token


def fenced_writes(record: Record, facts: TrialFacts) -> list[Violation]:
    """4. No result accepted, and no external call made, under a stale lease token."""
    if not record.claim_rows:
        return []
    # A call under a job's highest token or above has no newer claim, which settles
    # most calls of a long history without looking at their claims.
    top = record.top_token
    #: Job -> the positions of its claims, indexed at the first call that needs them.
    claims: dict[str, list[int]] = {}

    def newer_claim(job: str, token: int, t: float) -> Claim | None:
        if not claims:
            for k, row in enumerate(record.claim_rows):
                claims.setdefault(row[0], []).append(k)
        rows = record.claim_rows
        newer = [k for k in claims.get(job, []) if rows[k][1] > token and rows[k][3] < t]
        return record.claims[min(newer, key=lambda k: rows[k][3])] if newer else None

    out = []
    for k, (job, lease, worker, accepted, t) in enumerate(record.result_write_rows):
        if not accepted or top.get(job, lease) <= lease:
            continue
        stale_by = newer_claim(job, lease, t)
        if stale_by is not None:
            out.append(
                violation(
                    "fenced_writes",
                    job,
                    f"result write by {worker} under token {lease} was accepted after "
                    f"{stale_by.worker_id} claimed token {stale_by.token}",
                    record,
                    ledger=[record.result_writes[k], stale_by],
                )
            )
    # Tokens travel as text; the few distinct ones are parsed once each (-1: not yet).
    parsed: dict[str, int | None] = {}
    for a in record.arrivals:
        if a.kind != "write" or a.job_id is None or a.fencing_token is None:
            continue
        sent_under = parsed.get(a.fencing_token, -1)
        if sent_under == -1:
            sent_under = parsed[a.fencing_token] = token(a)
        if sent_under is None or top.get(a.job_id, sent_under) <= sent_under:
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
