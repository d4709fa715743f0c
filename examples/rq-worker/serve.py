#!/usr/bin/env python3
"""python3 serve.py

enqueue.py and status.py as one long-lived process (crashpoint.toml's ``[target.serve]``):
Redis, RQ and the record are imported once per trial rather than once per job and per
poll. It speaks crashpoint's serve protocol on stdin and stdout, one JSON line each way:
the handshake ``{"protocol": "crashpoint-serve", "version": 1, "op": ...}`` is answered
in kind, then ``{"op": "enqueue", "job": {...}}`` with ``{"ok": true}`` and
``{"op": "status", "job_id": ...}`` with the status line's object. A request it cannot
serve is answered ``{"error": "why"}``; logs go to stderr. It exits when stdin closes.
"""

from __future__ import annotations

import sys
from typing import Any

from redis import Redis
from rqbilling.delivery import deliver, queue
from rqbilling.record import Record, status
from rqbilling.serve_loop import serve
from rqbilling.settings import Settings


def enqueue(s: Settings, redis: Redis, doc: Any) -> dict[str, Any]:
    """What enqueue.py does with its payload file, with the document on the line."""
    if not isinstance(doc, dict) or not isinstance(doc.get("body"), dict):
        return {"error": 'expected "job": {"job_id", "provider", "body"}'}
    job_id = str(doc.get("job_id"))
    s.state_dir.mkdir(parents=True, exist_ok=True)
    record = Record(s.db_path)
    record.add(job_id, doc)
    record.close()
    deliver(queue(s, redis), job_id, doc)
    return {"ok": True}


def main() -> int:
    s = Settings.from_env()
    redis = Redis.from_url(s.redis_url)

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "enqueue":
            return enqueue(s, redis, request.get("job"))
        if op == "status":
            return status(s.db_path, str(request.get("job_id")))
        return {"error": f"unknown op {op!r}"}

    return serve(answer)


if __name__ == "__main__":
    sys.exit(main())
