"""python3 enqueue.py JOB_ID PAYLOAD_FILE [--drop-known]: deliver one job (again, if it
is known). ``--drop-known`` is a queue that ignores a job it already holds: no
redelivery can reach its workers, and crashpoint must say so, never call it held."""

from __future__ import annotations

import json
import sys

import jobdb


def main(job_id: str, payload_file: str, *flags: str) -> int:
    with open(payload_file, encoding="utf-8") as f:
        doc = json.load(f)
    conn = jobdb.connect()
    try:
        if "--drop-known" in flags and jobdb.known(conn, job_id):
            return 0
        jobdb.enqueue(conn, job_id, doc["provider"], json.dumps(doc["body"]))
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
