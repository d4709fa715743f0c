"""python3 status.py JOB_ID: the job's state as one JSON line (crashpoint's status)."""

from __future__ import annotations

import json
import sys

import jobdb

if __name__ == "__main__":
    print(json.dumps(jobdb.status(sys.argv[1])))
