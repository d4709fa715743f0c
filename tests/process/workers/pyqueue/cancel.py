"""python3 cancel.py JOB_ID: cancel one job (crashpoint's cancel command). Exits 0 once
the cancel is recorded in the queue; the worker that holds the job reads it before its
next write, and makes none."""

from __future__ import annotations

import sys

import jobdb

if __name__ == "__main__":
    conn = jobdb.connect()
    try:
        jobdb.cancel(conn, sys.argv[1])
    finally:
        conn.close()
