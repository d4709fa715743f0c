"""python3 enqueue.py JOB_ID PAYLOAD_FILE: queue the job with the steps its payload lists.

The same job enqueued again after it was acknowledged is a redelivery (the queue's
acknowledgement was lost): it goes back to the queue with its records as they are.
"""

from __future__ import annotations

import json
import sys
import time

from ledger import open_queue

job_id, payload_file = sys.argv[1], sys.argv[2]
with open(payload_file) as f:
    payload = json.load(f)
steps = [(s["name"], s["provider"]) for s in payload.get("steps", [])]
store = open_queue()
now = time.monotonic()
if not store.enqueue(job_id, payload["provider"], payload["body"], now=now, steps=steps):
    store.redeliver(job_id, now=now)
store.close()
