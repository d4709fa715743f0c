"""python3 serve.py (in pyqueue's directory on sys.path): pyqueue's enqueue and status
commands served, crashpoint's serve protocol on stdin and stdout (docs/getting-started.md).

Served once per run (``scope = "run"``), each request names its trial's directory and
variables: they are applied for that request alone, so one process serves every trial."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests/process/workers/pyqueue"))
import jobdb  # pyqueue's queue, found by the line above

HELLO = {"protocol": "crashpoint-serve", "version": 1}


def answer(request: dict[str, object]) -> dict[str, object]:
    """The reply to one request, in its trial's directory and environment when it names one."""
    env = request.get("env")
    if not isinstance(env, dict):
        return answer_here(request)
    saved, here = dict(os.environ), os.getcwd()
    os.environ.update({str(k): str(v) for k, v in env.items()})
    os.chdir(str(request["cwd"]))
    try:
        return answer_here(request)
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(saved)


def answer_here(request: dict[str, object]) -> dict[str, object]:
    if request.get("op") == "status":
        return jobdb.status(str(request["job_id"]))
    if request.get("op") == "enqueue":
        doc = request["job"]
        assert isinstance(doc, dict)
        conn = jobdb.connect()
        try:
            jobdb.enqueue(conn, str(doc["job_id"]), doc["provider"], json.dumps(doc["body"]))
        finally:
            conn.close()
        return {"ok": True}
    return {"error": f"unknown op {request.get('op')!r}"}


if __name__ == "__main__":
    if sys.stdin.readline():
        print(json.dumps(HELLO), flush=True)
        for line in sys.stdin:
            print(json.dumps(answer(json.loads(line))), flush=True)
