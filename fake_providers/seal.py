"""The seal on the control and oracle APIs: a per-provider secret the worker never sees.

The worker under test talks to the same port as the harness, so the port cannot tell
them apart; the secret can. The launcher makes it and writes it into the provider's
stdin pipe, never into an environment or an argv (both readable by any process of the
same user under ``/proc``), and only the harness's ``ProviderClient`` sends it back.
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Mapping

#: The request header carrying the secret on every control and oracle call.
SECRET_HEADER = "X-Crashpoint-Secret"  # noqa: S105 (a header name, not a secret)
#: Path prefixes behind the seal; everything else (the business API) stays open.
SEALED_PREFIXES = ("/_control", "/_oracle")
#: A secret line longer than this is not one the launcher wrote.
_MAX_SECRET_BYTES = 1024


def make_secret() -> str:
    return secrets.token_urlsafe(32)


def is_sealed(path: str) -> bool:
    return path.startswith(SEALED_PREFIXES)


def authorized(headers: Mapping[str, str], secret: str | None) -> bool:
    """Whether ``headers`` (lower-case keys) carry ``secret``; no secret means unsealed."""
    if secret is None:
        return True
    given = headers.get(SECRET_HEADER.lower())
    if given is None:
        return False
    # Bytes, not str: compare_digest refuses non-ASCII str, and a header is the sender's.
    return hmac.compare_digest(given.encode("utf-8", "replace"), secret.encode())


def read_secret(fd: int) -> str:
    """Read the one line the launcher writes first into ``fd``; ValueError if there is none.

    Byte by byte, so nothing after the line is consumed: the same pipe then only tells
    the provider, by its EOF, that the launcher is gone.
    """
    line = bytearray()
    while len(line) <= _MAX_SECRET_BYTES:
        byte = os.read(fd, 1)
        if not byte:
            raise ValueError("stdin closed before a secret line arrived")
        if byte == b"\n":
            secret = line.decode("ascii", "replace").strip()
            if not secret:
                raise ValueError("the secret line on stdin is empty")
            return secret
        line += byte
    raise ValueError(f"the secret line on stdin is longer than {_MAX_SECRET_BYTES} bytes")
