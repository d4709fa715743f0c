"""Payload fingerprints: how a provider tells "the same request" from "a different one"."""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: Chosen by the worker per attempt, so it must not change the fingerprint of a payload.
MARKER_FIELD = "client_marker"


def canonical_json(value: Any) -> bytes:
    """Sorted keys, compact separators, UTF-8: equal values give equal bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def fingerprint(body: dict[str, Any], *, kind: str) -> str:
    """sha256 hex of the canonical body; plain kinds leave out ``client_marker``."""
    if kind != "idempotent":
        body = {k: v for k, v in body.items() if k != MARKER_FIELD}
    return hashlib.sha256(canonical_json(body)).hexdigest()
