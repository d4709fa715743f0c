"""python3 enqueue.py JOB_ID PAYLOAD_FILE [--steps A,B]: queue the job with the steps its
payload lists (``--steps``: a job of a payload that lists none is these providers' calls,
in this order, as a worker whose every job charges, then mails does it; each step named
after its provider, or ``STEP=PROVIDER``).

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
if not steps and "--steps" in sys.argv:
    # PROVIDER names its step after it; STEP=PROVIDER names it otherwise.
    listed = sys.argv[sys.argv.index("--steps") + 1].split(",")
    steps = [(s.split("=")[0], s.split("=")[-1]) for s in listed]
store = open_queue()
now = time.monotonic()
if not store.enqueue(job_id, payload["provider"], payload["body"], now=now, steps=steps):
    store.redeliver(job_id, now=now)
store.close()
