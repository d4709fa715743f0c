"""python3 enqueue.py JOB_ID PAYLOAD_FILE: deliver one job (again, if it is known)."""

from __future__ import annotations

import json
import sys

import jobdb


def main(job_id: str, payload_file: str) -> int:
    with open(payload_file, encoding="utf-8") as f:
        doc = json.load(f)
    conn = jobdb.connect()
    try:
        jobdb.enqueue(conn, job_id, doc["provider"], json.dumps(doc["body"]))
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
