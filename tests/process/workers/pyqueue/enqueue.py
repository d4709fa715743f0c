"""python3 enqueue.py JOB_ID PAYLOAD_FILE [--drop-known | --refuse-known]: deliver one
job (again, if it is known). ``--drop-known`` is a queue that ignores a job it already
holds: no redelivery can reach its workers, and crashpoint must say the cell was not
exercised. ``--refuse-known`` ignores it too, and says so (``{"queued": false}``): a
queue that deduplicates, which crashpoint calls held, in those words."""

from __future__ import annotations

import json
import sys

import jobdb


def main(job_id: str, payload_file: str, *flags: str) -> int:
    with open(payload_file, encoding="utf-8") as f:
        doc = json.load(f)
    conn = jobdb.connect()
    try:
        dedupes = bool({"--drop-known", "--refuse-known"} & set(flags))
        body = json.dumps(doc["body"])
        queued = jobdb.enqueue(conn, job_id, doc["provider"], body, unless_known=dedupes)
        if not queued and "--refuse-known" in flags:
            print(json.dumps({"queued": False}))
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
