"""python3 status.py JOB_ID [--no-external-ref] [--count-claims]: the job's state as one
JSON line (crashpoint's status). ``--no-external-ref`` leaves out the provider's record
id, as a worker that never kept it would; ``--count-claims`` reports as its attempts how
often the job was claimed (each retry, takeover and reconcile of an unknown outcome),
not how often it was sent, as many frameworks' attempt counters do."""

from __future__ import annotations

import json
import sys

import jobdb

if __name__ == "__main__":
    status = jobdb.status(sys.argv[1], count_claims="--count-claims" in sys.argv[2:])
    if "--no-external-ref" in sys.argv[2:]:
        status.pop("external_ref", None)
    print(json.dumps(status))
