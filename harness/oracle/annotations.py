"""tool_annotations: what an MCP tool declares, held to what the provider then did.

An MCP provider's tools declare hints (``idempotentHint``, ``readOnlyHint``, ...); an
agent may lean on them (retry an "idempotent" tool blindly, call a "read-only" one
freely). The trial records each tool's annotations at its start (a ``tools`` event) and
every effect's arrival path names the tool that made it, so the declaration can be
checked against the provider's own log:

- ``idempotentHint: true`` promises that calling the tool again with the same arguments
  has no further effect: two committed effects from one such tool with the same key,
  marker and payload fingerprint break it;
- ``readOnlyHint: true`` promises no effect at all: any committed effect breaks it.

``destructiveHint`` says whether a tool may overwrite or delete; the fake's tools only
ever add, so no effect they make can contradict ``destructiveHint: false`` and it is
not judged (a declared ``true`` is merely cautious).

A warning, not an invariant: the finding is about the tool server's declaration, which
the worker under test neither controls nor can verify. Where the second effect belongs
to one logical job, ``no_duplicate_effect`` already fails the trial for the worker's
part; this says why (the server declared a guarantee it does not keep) and also catches
the false declaration when the duplicate came from two jobs sending the same arguments,
where no invariant speaks.
"""

from __future__ import annotations

from collections import defaultdict

from harness.contract.records import Arrival, Effect
from harness.oracle.evidence import Violation, violation
from harness.oracle.facts import Record, TrialFacts

NAME = "tool_annotations"


def tool_annotations(record: Record, facts: TrialFacts) -> list[Violation]:
    """Tools whose committed effects contradict the annotations they declared."""
    del facts
    if not record.tools:
        return []
    arrivals = {(a.provider, a.id): a for a in record.arrivals}
    same_call: dict[tuple[str, str, str | None, str | None, str], list[Effect]] = defaultdict(list)
    out: list[Violation] = []
    for effect in record.effects:
        arrival = arrivals.get((effect.provider, effect.arrival_id))
        if arrival is None:
            continue
        hints = record.tools.get((effect.provider, arrival.path))
        if hints is None:
            continue
        if hints.get("readOnlyHint") is True:
            out.append(_finding(record, arrival, [effect], "declares readOnlyHint: true"))
        if hints.get("idempotentHint") is True:
            key = (
                effect.provider,
                arrival.path,
                effect.idempotency_key,
                effect.client_marker,
                effect.fingerprint,
            )
            same_call[key].append(effect)
    for effects in same_call.values():
        if len(effects) > 1:
            first = arrivals[(effects[0].provider, effects[0].arrival_id)]
            out.append(
                _finding(record, first, effects, "declares idempotentHint: true", repeated=True)
            )
    return out


def _finding(
    record: Record,
    arrival: Arrival,
    effects: list[Effect],
    declared: str,
    *,
    repeated: bool = False,
) -> Violation:
    tool = arrival.path.rsplit("/", 1)[-1]
    name = arrival.idempotency_key or arrival.client_marker
    did = (
        f"committed {len(effects)} effects for the same arguments ({name!r}, one payload)"
        if repeated
        else f"committed effect {effects[0].id}"
    )
    found = violation(
        NAME,
        arrival.job_id,
        f"tool {tool} at {arrival.provider} {declared} but {did}",
        record,
        effects=effects,
    )
    cited = record.tools_index.get(arrival.provider)
    if cited is not None and cited not in found.events:
        found.events.append(cited)
        found.events.sort()
        found.evidence["events"] = list(found.events)
    return found


__all__ = ["NAME", "tool_annotations"]
