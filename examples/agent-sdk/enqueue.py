#!/usr/bin/env python3
"""python3 enqueue.py JOB_ID PAYLOAD_FILE

Records the job in the trial's SQLite record, which is the agent's queue: a worker
claims it from there. Beside the harness's document it keeps the task the model is
shown (what to charge, whom to tell), built from the job's body once, here. A job id
seen before keeps its record (enqueueing it again is a redelivery the record absorbs:
the job is still done once).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import sdkagent  # noqa: F401  (puts the RQ example's record on the path)
from rqbilling.record import Record
from sdkagent.settings import Settings, task


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: python3 enqueue.py JOB_ID PAYLOAD_FILE\n")
        return 2
    job_id, payload = argv
    try:
        doc = json.loads(Path(payload).read_text())
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"enqueue: cannot read the payload {payload}: {exc}\n")
        return 1
    if not isinstance(doc, dict) or not isinstance(doc.get("body"), dict):
        sys.stderr.write(f'enqueue: {payload}: expected {{"job_id", "provider", "body"}}\n')
        return 1
    doc["job_id"] = job_id
    doc["task"] = task(job_id, doc["body"])
    s = Settings.from_env()
    s.state_dir.mkdir(parents=True, exist_ok=True)
    record = Record(s.db_path)
    record.add(job_id, doc)
    record.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
