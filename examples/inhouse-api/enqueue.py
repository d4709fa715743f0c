#!/usr/bin/env python3
"""python3 enqueue.py JOB_ID PAYLOAD_FILE

Records the job in the trial's SQLite record (once: a job id seen before keeps its
record) and puts one delivery on its RQ queue. Enqueueing a job twice delivers it twice,
as a real broker may; the worker that claims it in the record acts, the other declines.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from orderdesk.delivery import deliver, queue
from orderdesk.record import Record
from orderdesk.settings import Settings
from redis import Redis


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
    if doc.get("job_id", job_id) != job_id:
        sys.stderr.write(f"enqueue: {payload}: job_id {doc['job_id']!r} is not {job_id!r}\n")
        return 1
    doc["job_id"] = job_id
    s = Settings.from_env()
    s.state_dir.mkdir(parents=True, exist_ok=True)
    record = Record(s.db_path)
    record.add(job_id, doc)
    record.close()
    deliver(queue(s, Redis.from_url(s.redis_url)), job_id, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
