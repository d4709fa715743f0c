"""Where a failpoint cell's kill really landed, said when it may not be the cell's own.

A cell aims at one provider. A hold armed for it lets go every hit whose line names
another provider (its ``provider``, or its ``step``), so a job that calls billing, then
mailer, is stopped at mailer's boundary in a mailer cell. A line that names neither is
held as before; when the job also called another provider, the report must not claim an
exact hit at the cell's: this module says where the kill landed, or may have.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.history import Event

#: What a worker adds to its failpoint line so its kills land at the right call.
NAME_IT = 'name the call\'s provider in the failpoint line ("provider": "NAME")'


def landing(events: Sequence[Event], *, provider: str, providers: int) -> str | None:
    """None when the held failpoint hit is the cell's own, else a sentence on where it
    landed. ``provider`` is the cell's; ``providers`` how many the trial started."""
    held = [e for e in events if e.kind == "failpoint" and e.fields.get("held")]
    if not held or providers < 2:
        return None
    hit = held[0]
    named = hit.fields.get("provider")
    point = str(hit.fields.get("point"))
    if isinstance(named, str):
        if named == provider:
            return None
        return f"reached at {named}, not {provider}: the hit at {point} named {named}"
    writes = [e for e in events if e.kind == "arrival" and e.job == hit.job]
    others = sorted({str(e.fields.get("provider")) for e in writes} - {provider})
    if not others:
        return None
    before = [e for e in writes if e.t < hit.t]
    if point == "after_external_call" and before:
        # The response in hand is the last write's: that call's provider is known.
        last = str(before[-1].fields.get("provider"))
        if last != provider:
            return f"reached at {last}, not {provider}: the {point} hit followed a write to {last}"
        return None
    return (
        f"landed at a {point} whose line named no provider; {hit.job} also called "
        f"{', '.join(others)}, so the kill may have landed there, not at {provider} "
        f"({NAME_IT})"
    )


def exercised(
    events: Sequence[Event],
    *,
    point: str,
    provider: str,
    providers: int,
    reached_by: str | None,
    said: str | None,
) -> str:
    """What the cell exercised, in one sentence: ``said`` when its driver told, else from
    how its injection was reached (and, at a failpoint, where it landed)."""
    if said is not None:
        return said
    if reached_by == "failpoint":
        elsewhere = landing(events, provider=provider, providers=providers)
        if elsewhere is not None:
            return elsewhere
        return f"{point} at {provider}: reached at that boundary (failpoint: exact)"
    if reached_by == "provider":
        return f"{point} at {provider}: reached at the provider (black-box)"
    if reached_by is None:
        return f"{point} at {provider}: applied; no boundary confirmed it"
    return f"{point} at {provider}: reached ({reached_by})"
