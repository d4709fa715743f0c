"""``no_effect_after_cancel``: once the target acknowledged a job's cancel, no attempt
that starts after it makes an effect (issue 34, a Temporal report: an activity cancelled
while in flight, and both the original and its retry landed).

Decided from the providers' ground truth: an effect counts from the moment its write
reached the provider. A write that arrived before the acknowledgement was in flight
when the job was cancelled and may land (a cancel cannot recall a request already
sent); one that arrived after it, and made an effect, started after the cancel. The
acknowledgement is the harness's ``cancel`` event, recorded once the target's cancel
returned. A replay (the same key answered again) makes no effect and is not counted.
"""

from __future__ import annotations

from harness.oracle.evidence import Violation, violation
from harness.oracle.facts import Record, TrialFacts

NAME = "no_effect_after_cancel"


def no_effect_after_cancel(record: Record, facts: TrialFacts) -> list[Violation]:
    """No effect of a cancelled job whose write reached its provider after the cancel."""
    del facts
    if not record.cancels:
        return []
    arrivals = {(a.provider, a.id): a for a in record.arrivals if a.job_id in record.cancels}
    out = []
    for e in record.effects:
        if e.job_id is None or e.job_id not in record.cancels:
            continue
        cancelled_at, at = record.cancels[e.job_id]
        write = arrivals.get((e.provider, e.arrival_id))
        started = write.t_mono if write is not None else e.t_mono
        if started <= cancelled_at:
            continue
        v = violation(
            NAME,
            e.job_id,
            f"effect #{e.id} of {e.job_id} at {e.provider} was made by a write that reached "
            f"it {started - cancelled_at:.3f} s after the job's cancel was acknowledged",
            record,
            arrivals=[write] if write is not None else [],
            effects=[e],
        )
        v.events.append(at)
        v.events.sort()
        v.evidence["events"] = v.events
        out.append(v)
    return out
