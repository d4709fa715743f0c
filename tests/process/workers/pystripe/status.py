"""python3 status.py JOB: done once the job's PaymentIntent is recorded, else pending."""

import json
import os
import pathlib
import sys

done = pathlib.Path(os.environ.get("CRASHPOINT_STATE_DIR", ".")) / "done" / sys.argv[1]
if done.exists():
    print(json.dumps({"state": "done", "external_ref": done.read_text()}))
else:
    print(json.dumps({"state": "pending"}))
