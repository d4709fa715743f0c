"""python3 enqueue.py JOB PAYLOAD_FILE: queue the job as a file in the state directory."""

import os
import pathlib
import sys

queue = pathlib.Path(os.environ.get("CRASHPOINT_STATE_DIR", ".")) / "queue"
queue.mkdir(exist_ok=True)
tmp = queue / f".{sys.argv[1]}.tmp"
tmp.write_bytes(pathlib.Path(sys.argv[2]).read_bytes())
tmp.replace(queue / f"{sys.argv[1]}.json")
