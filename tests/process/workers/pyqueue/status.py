"""python3 status.py JOB_ID [--no-external-ref]: the job's state as one JSON line
(crashpoint's status). ``--no-external-ref`` leaves out the provider's record id, as a
worker that never kept it would."""

from __future__ import annotations

import json
import sys

import jobdb

if __name__ == "__main__":
    status = jobdb.status(sys.argv[1])
    if "--no-external-ref" in sys.argv[2:]:
        status.pop("external_ref", None)
    print(json.dumps(status))
