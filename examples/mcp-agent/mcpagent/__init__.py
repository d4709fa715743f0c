"""A support agent that acts through MCP tool servers: open a ticket, then tell the customer.

Each job calls ``tickets`` (an idempotent MCP server: ``create_ticket`` under a key, looked
up with ``get_ticket``) and then ``chat`` (a plain one: ``send_message`` with a marker,
looked up with ``find_messages``). The queue and the durable truth are one SQLite record
in the trial's state directory; the record, its lease keeper and the failpoint client
are the RQ example's (``examples/rq-worker/rqbilling``), imported as they are: the
protocol is the same, only the queue and the transport to the providers differ.
"""

from __future__ import annotations

import sys
from pathlib import Path

_RQ_EXAMPLE = Path(__file__).resolve().parents[2] / "rq-worker"
if str(_RQ_EXAMPLE) not in sys.path:
    sys.path.append(str(_RQ_EXAMPLE))
