"""Identities a provider acts under: sessions that expire and profiles that change.

A worker names the identity (a browser profile, an account) each request acts under in
the ``X-Crashpoint-Identity`` header; the provider records it on the arrival. The harness
may tell the provider, per trial, that an identity's session has expired or that its
profile now belongs to another identity; from then on every business request under it
is refused before anything happens: 401 for an expired session, 403 for a changed
profile, the latter naming the identity the profile now holds in its own
``X-Crashpoint-Identity`` response header (what a worker that logs in again would find).
A request that names no identity is never refused: nothing can bind it to one.
"""

from __future__ import annotations

import threading
from typing import Any

from fake_providers.problems import Problem

HEADER = "X-Crashpoint-Identity"
#: The states an identity can be put in through ``POST /_control/identities``.
STATES = ("valid", "expired", "changed")


class IdentityBoard:
    """Which identities are no longer good, and what a changed profile holds now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: dict[str, tuple[str, str | None]] = {}

    def set(self, identity: str, state: str, *, now_acts_as: str | None = None) -> None:
        if not isinstance(identity, str) or not identity:
            raise ValueError(f"identity={identity!r} must be a non-empty string")
        if not isinstance(state, str) or state not in STATES:
            raise ValueError(f"state={state!r} is unknown; use one of {', '.join(STATES)}")
        if now_acts_as is not None and (not isinstance(now_acts_as, str) or not now_acts_as):
            raise ValueError(f"now_acts_as={now_acts_as!r} must be a non-empty string")
        if state == "changed" and now_acts_as is None:
            raise ValueError("a changed profile needs now_acts_as: the identity it holds now")
        if state == "changed" and now_acts_as == identity:
            raise ValueError("now_acts_as must differ from the identity whose profile changed")
        with self._lock:
            if state == "valid":
                self._states.pop(identity, None)
            else:
                self._states[identity] = (state, now_acts_as if state == "changed" else None)

    def check(self, identity: str | None) -> None:
        """Raise the refusal a request under ``identity`` gets, if any."""
        if identity is None:
            return
        with self._lock:
            state, acts_as = self._states.get(identity, ("valid", None))
        if state == "expired":
            raise Problem(
                401,
                f"the session of identity {identity!r} has expired; nothing was done. Log in "
                "again and verify the identity before acting under it",
                code="session_expired",
            )
        if state == "changed":
            assert acts_as is not None
            raise Problem(
                403,
                f"the profile of identity {identity!r} now acts as {acts_as!r}; nothing was "
                "done. Acting now would act as another identity",
                headers=((HEADER, acts_as),),
                code="identity_changed",
            )

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                ident: {"state": state, "now_acts_as": acts_as}
                for ident, (state, acts_as) in sorted(self._states.items())
            }

    def reset(self) -> None:
        with self._lock:
            self._states.clear()
