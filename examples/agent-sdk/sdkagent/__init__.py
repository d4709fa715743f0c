"""A billing agent on the vendors' own SDKs: the model plans, Stripe charges, Slack tells.

Each job asks a model (the official ``openai`` SDK) what to do; the model answers tool
calls ``charge`` and ``notify``, which the agent performs through the official ``stripe``
and ``slack_sdk`` SDKs. The queue and the durable truth are one SQLite record in the
trial's state directory; the record, its lease keeper and the failpoint client are the
RQ example's (``examples/rq-worker/rqbilling``), imported as they are, as the MCP agent
does: the protocol is the same, only the transport to the providers differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

_RQ_EXAMPLE = Path(__file__).resolve().parents[2] / "rq-worker"
if str(_RQ_EXAMPLE) not in sys.path:
    sys.path.append(str(_RQ_EXAMPLE))
