#!/usr/bin/env python3
"""python3 serve.py

enqueue.py and status.py as one long-lived process for the whole run (crashpoint.toml's
``[target.serve]`` with ``scope = "run"``): a matrix enqueues some 120 jobs, and each
one-shot command is a Python start (about 0.1 s of CPU). It speaks crashpoint's serve
protocol on stdin and stdout, one JSON line each way: the handshake is answered in kind,
then ``{"op": "enqueue", "job": {...}, "cwd", "env"}`` with ``{"ok": true}`` and
``{"op": "status", "job_id", "cwd", "env"}`` with the status line's object. Each request
is answered for the trial it names (its ``env``, over this process's own); nothing of a
trial is kept between requests. A request it cannot serve is answered ``{"error": "why"}``.
It exits when stdin closes.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import mcpagent  # noqa: F401  (puts the RQ example's record on the path)
from mcpagent.settings import Settings
from rqbilling.record import Record, status
from rqbilling.serve_loop import serve


def settings(request: dict[str, Any]) -> Settings:
    """The trial's settings: its env over ours, its cwd as the one-shot command's."""
    env = {**os.environ, "CRASHPOINT_STATE_DIR": str(request.get("cwd") or os.getcwd())}
    return Settings.from_env(env={**env, **(request.get("env") or {})})


def enqueue(s: Settings, doc: Any) -> dict[str, Any]:
    """What enqueue.py does with its payload file, with the document on the line."""
    if not isinstance(doc, dict) or not isinstance(doc.get("body"), dict):
        return {"error": 'expected "job": {"job_id", "provider", "body"}'}
    s.state_dir.mkdir(parents=True, exist_ok=True)
    record = Record(s.db_path)
    record.add(str(doc.get("job_id")), doc)
    record.close()
    return {"ok": True}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    if op == "enqueue":
        return enqueue(settings(request), request.get("job"))
    if op == "status":
        return status(settings(request).db_path, str(request.get("job_id")))
    return {"error": f"unknown op {op!r}"}


if __name__ == "__main__":
    sys.exit(serve(answer, scope="run"))
