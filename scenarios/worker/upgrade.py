"""Version 2 of the reference worker: what changed, and how it keeps faith with the
attempts version 1 left behind (``upgrade_during_recovery``).

Version 2 names a job's effect differently (``v2-effect-<job>``, a changed attempt-key
format, as a release that moves keys into a namespace does). A job whose attempt
version 1 recorded, and left unknown when it crashed, is still version 1's attempt:
version 2 reconciles it under the key version 1 recorded and sent, and keeps that key
for any retry, since a key once sent is the job's name at the provider. Only a job no
version recorded a key for gets a key in the new format.

The ``upgrade_forgets_old_attempts`` mutant recognises only attempts in its own format:
version 1's unknown attempt is taken for none, and the job is written again under a
version 2 key, a second effect (a DBOS report: a new release recovering the old
release's workflows under its own code).
"""

from __future__ import annotations

from scenarios.ledger import Claimed

#: The version a worker's code is when nothing says otherwise.
FIRST = 1
#: The prefix of version 2's keys.
V2_PREFIX = "v2-"


def v2_key(c: Claimed, *, forget_older: bool) -> str:
    """The key version 2 sends for ``c``: the one recorded for the job, if any (an
    older version's included), else one in version 2's format."""
    if c.idempotency_key is not None and not (forget_older and recorded_by_older(c)):
        return c.idempotency_key
    return f"{V2_PREFIX}effect-{c.job_id}"


def recorded_by_older(c: Claimed) -> bool:
    """An earlier version recorded ``c``'s key (it is not in version 2's format)."""
    return c.idempotency_key is not None and not c.idempotency_key.startswith(V2_PREFIX)
