"""Stripe's request encodings: form bodies in bracket notation, and its search queries.

Stripe's v1 API takes ``application/x-www-form-urlencoded`` bodies whose keys nest with
brackets (``metadata[job_id]=j-0001``, ``payment_method_types[0]=card``,
``expand[]=customer``); both official SDKs write them that way. Reading them back into
nested values gives the parameters Stripe compares under one idempotency key, so that
is what the provider fingerprints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from fake_providers.problems import Problem

FORM_TYPE = "application/x-www-form-urlencoded"
#: Deeper keys than any Stripe parameter has: refused, so no body can nest without bound.
MAX_DEPTH = 8
_SEGMENT = re.compile(r"\[([^\[\]]*)\]")


class StripeProblem(Problem):
    """A Problem that knows Stripe's own ``code`` and ``param`` for its envelope."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        code: str = "invalid_request",
        stripe_code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(status, detail, code=code)
        self.stripe_code = stripe_code
        self.param = param


def bad_param(detail: str, param: str | None, stripe_code: str | None = None) -> StripeProblem:
    """Stripe's answer to a parameter it cannot take: 400 ``invalid_request_error``."""
    return StripeProblem(400, detail, stripe_code=stripe_code, param=param)


def decode_form(body: bytes, content_type: str) -> dict[str, Any]:
    """A form body as nested parameters: dicts, lists (numbered or ``[]`` keys), strings."""
    ctype = content_type.split(";")[0].strip().lower()
    if body and ctype != FORM_TYPE:
        raise bad_param(
            f"Content-Type {ctype or '(none)'!r} is not accepted; Stripe's v1 API takes "
            f"{FORM_TYPE} bodies in bracket notation (metadata[job_id]=j-0001)",
            None,
        )
    try:
        text = body.decode("utf-8")
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=False, errors="strict")
    except UnicodeDecodeError as exc:
        raise bad_param(f"the body is not UTF-8 ({exc.reason}); send UTF-8", None) from None
    return decode_pairs(pairs)


def decode_pairs(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """``[("metadata[job_id]", "j-1"), ...]`` as ``{"metadata": {"job_id": "j-1"}, ...}``."""
    root: dict[str, Any] = {}
    for raw_key, value in pairs:
        path = _key_path(raw_key)
        node = root
        for i, seg in enumerate(path[:-1]):
            if seg == "":  # "a[][b]": a new element each time
                seg = str(_next_index(node))
            child = node.get(seg)
            if child is None:
                child = node[seg] = {}
            if not isinstance(child, dict):
                where = "[".join(path[: i + 1])
                raise bad_param(f"{raw_key!r} nests under {where!r}, which has a value", raw_key)
            node = child
        last = path[-1] if path[-1] != "" else str(_next_index(node))
        if last in node:
            raise bad_param(f"{raw_key!r} is given twice; send each parameter once", raw_key)
        node[last] = value
    decoded: dict[str, Any] = _lists(root)
    return decoded


def _key_path(raw_key: str) -> list[str]:
    head, _, rest = raw_key.partition("[")
    if not head:
        raise bad_param(f"parameter name {raw_key!r} is empty before its brackets", raw_key)
    segments = [head]
    if rest:
        tail = "[" + rest
        found = _SEGMENT.findall(tail)
        if "".join(f"[{s}]" for s in found) != tail:
            raise bad_param(f"parameter name {raw_key!r} has unbalanced brackets", raw_key)
        segments.extend(found)
    if len(segments) > MAX_DEPTH:
        raise bad_param(f"{raw_key!r} nests {len(segments)} deep; at most {MAX_DEPTH}", raw_key)
    return segments


def _next_index(node: dict[str, Any]) -> int:
    return sum(1 for k in node if k.isdigit())


def _lists(value: Any) -> Any:
    """Dicts keyed 0..n-1 become lists, as the SDKs encode lists (``a[0]=x&a[1]=y``)."""
    if not isinstance(value, dict):
        return value
    items = {k: _lists(v) for k, v in value.items()}
    if items and all(k.isascii() and k.isdigit() for k in items):
        indices = sorted(int(k) for k in items)
        if indices == list(range(len(indices))):
            return [items[str(i)] for i in indices]
    return items


# -- search queries -------------------------------------------------------------------

_CLAUSE = re.compile(
    r"""\s*(?:metadata\[(?P<mq>['"])(?P<mkey>[^'"]+)(?P=mq)\]|(?P<field>[a-z_]+))"""
    r"""\s*:\s*(?:'(?P<v1>[^']*)'|"(?P<v2>[^"]*)"|(?P<v3>[^\s'"]+))\s*"""
)


@dataclass(frozen=True)
class Clause:
    """``metadata['job_id']:'j-1'`` is ``Clause("metadata", "job_id", "j-1")``."""

    field: str
    key: str | None
    value: str

    def matches(self, obj: dict[str, Any]) -> bool:
        if self.field == "metadata":
            got: Any = (obj.get("metadata") or {}).get(self.key or "")
        else:
            got = obj.get(self.field)
        return got is not None and str(got) == self.value


@dataclass(frozen=True)
class Query:
    clauses: tuple[Clause, ...]
    any_of: bool  # OR (any clause) rather than AND (every clause)

    def matches(self, obj: dict[str, Any]) -> bool:
        hits = (c.matches(obj) for c in self.clauses)
        return any(hits) if self.any_of else all(hits)

    def job_id(self) -> str | None:
        """The one job the query names (``metadata['job_id']:...``), or None."""
        jobs = {c.value for c in self.clauses if c.field == "metadata" and c.key == "job_id"}
        if len(jobs) != 1 or (self.any_of and len(self.clauses) > 1):
            return None
        return jobs.pop()


def parse_query(text: str, fields: frozenset[str]) -> Query:
    """A subset of Stripe's search query language: exact ``field:'value'`` clauses on
    ``metadata['key']`` or one of ``fields``, joined by AND or by OR (not both)."""
    parts = re.split(r"\s+(AND|OR)\s+", text.strip())
    joins = set(parts[1::2])
    if len(joins) > 1:
        raise bad_param(f"query {text!r} mixes AND and OR; Stripe's search allows one", "query")
    clauses = []
    for part in parts[0::2]:
        m = _CLAUSE.fullmatch(part)
        if m is None or (m["field"] is not None and m["field"] not in fields):
            allowed = ", ".join(sorted(fields))
            raise bad_param(
                f"search clause {part.strip()!r} is not understood; use "
                f"metadata['key']:'value' or one of {allowed} as field:'value'",
                "query",
            )
        value = next(v for v in (m["v1"], m["v2"], m["v3"]) if v is not None)
        if m["field"] is not None:
            clauses.append(Clause(m["field"], None, value))
        else:
            clauses.append(Clause("metadata", m["mkey"], value))
    return Query(tuple(clauses), any_of=joins == {"OR"})
