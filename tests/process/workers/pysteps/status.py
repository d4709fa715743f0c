"""python3 status.py JOB_ID: one JSON line with the job's state, as crashpoint reads it."""

from __future__ import annotations

import json
import sys

from ledger import open_queue

job_id = sys.argv[1]
store = open_queue()
row = next((j for j in store.jobs() if j.job_id == job_id), None)
store.close()
if row is None:
    state = "pending"
elif row.needs_review:
    state = "needs_review"
elif row.delivery_state in ("acknowledged", "dead_lettered"):
    state = "done" if row.delivery_state == "acknowledged" else "dead_lettered"
else:
    state = "pending"
print(json.dumps({"state": state, "attempts": row.attempts if row else 0}))
