"""python3 cancel.py JOB_ID [--after S]: cancel one job (crashpoint's cancel command).
Exits 0 once the cancel is recorded in the queue; the worker that holds the job reads it
before its next write, and makes none. ``--after S`` takes S seconds first, as a cancel
that waits on a slow service does."""

from __future__ import annotations

import sys
import time

import jobdb

if __name__ == "__main__":
    if "--after" in sys.argv:
        time.sleep(float(sys.argv[sys.argv.index("--after") + 1]))
    conn = jobdb.connect()
    try:
        jobdb.cancel(conn, sys.argv[1])
    finally:
        conn.close()
