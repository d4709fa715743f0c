"""Key hygiene: idempotency keys and markers must carry no secrets and no personal data.

A key is logged by the worker, stored by the provider (often for a day or more) and
shown to whoever reads either log, so seed 003 wants it derived from the logical job
only. This warning looks at every key and marker that reached a provider for
token-shaped strings (well-known credential prefixes, JSON Web Tokens, bearer
credentials), email addresses, and the stand-in values the harness put into the job
fields the target marks sensitive (``[target] sensitive_fields``). A digest of the job
id is fine and is not flagged: only shapes that are secrets on sight count, so the
warning stays silent on a worker that does it right.

The warning names the offending key or marker with the offending part redacted: the
report must not repeat the secret it warns about.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from harness.contract.records import Arrival
from harness.oracle.evidence import Violation
from harness.oracle.facts import Record, TrialFacts
from harness.oracle.warn import WARNINGS

NAME = "key_hygiene"

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
#: Credentials recognisable by their shape: a vendor prefix, a JWT, an HTTP credential.
TOKEN = re.compile(
    r"(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{8,}"  # Stripe-style API keys
    r"|gh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
    r"|AIza[0-9A-Za-z_-]{30,}"  # Google API keys
    r"|eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"  # JSON Web Tokens
    r"|(?i:bearer|basic)[ :+_-][A-Za-z0-9._~+/=-]{8,}"
)


def key_hygiene(record: Record, facts: TrialFacts) -> list[Violation]:
    """One warning per key or marker (per provider and job) that carries a secret."""
    out: list[Violation] = []
    seen: set[tuple[str, str | None, str, str]] = set()
    for a in record.arrivals:
        for what, name in (("idempotency key", a.idempotency_key), ("marker", a.client_marker)):
            if not name or (a.provider, a.job_id, what, name) in seen:
                continue
            found = list(_findings(name, facts.sensitive_values))
            if not found:
                continue
            seen.add((a.provider, a.job_id, what, name))
            out.append(_warning(a, what, name, found, record))
    return out


def _findings(name: str, sensitive: Mapping[str, str]) -> Iterator[tuple[int, int, str]]:
    """``(start, end, label)`` of each secret inside ``name``, left to right."""
    spans: list[tuple[int, int, str]] = []
    for value, field in sensitive.items():
        start = name.find(value)
        while value and start >= 0:
            spans.append((start, start + len(value), field))
            start = name.find(value, start + 1)
    spans += [(m.start(), m.end(), "email address") for m in EMAIL.finditer(_unless_msg_id(name))]
    spans += [(m.start(), m.end(), "token") for m in TOKEN.finditer(name)]
    # Overlaps (a sensitive email field is an email too): the earliest, longest wins.
    end = -1
    for s, e, label in sorted(spans, key=lambda x: (x[0], -x[1])):
        if s >= end:
            end = e
            yield s, e, label


def _unless_msg_id(name: str) -> str:
    """``name`` with a Message-ID's right side blanked: ``<receipt-j-0001@mail.example>``
    has an address's shape by RFC 5322 (the marker an smtp provider records), and only
    an address inside its left side is one."""
    if name.startswith("<") and name.endswith(">") and "@" in name:
        at = name.rindex("@")
        return name[:at] + " " * (len(name) - at)
    return name


def redact(name: str, found: list[tuple[int, int, str]]) -> str:
    """``name`` with each finding replaced by its label and at most two leading chars."""
    out, at = [], 0
    for s, e, label in found:
        shown = name[s : s + 2] if e - s > 6 else ""
        out += [name[at:s], f"<{label}:{shown}…>" if shown else f"<{label}>"]
        at = e
    out.append(name[at:])
    return "".join(out)


def _warning(
    a: Arrival, what: str, name: str, found: list[tuple[int, int, str]], record: Record
) -> Violation:
    shown = redact(name, found)
    labels = sorted({label for _, _, label in found})
    kinds = ", ".join(
        label if label in ("email address", "token") else f"the sensitive field {label}"
        for label in labels
    )
    message = (
        f"{what} {shown!r} sent to {a.provider} carries {kinds}: keys and markers are "
        "logged and stored by providers; derive them from the job id only (a digest is fine)"
    )
    events = sorted({record.arrival_index[(a.provider, a.id)]})
    evidence = {"name": shown, "found": labels, "arrival": a.id, "events": events}
    return Violation(NAME, a.job_id, message, evidence, events)


WARNINGS[NAME] = key_hygiene
