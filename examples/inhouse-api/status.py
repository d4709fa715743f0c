#!/usr/bin/env python3
"""python3 status.py JOB_ID

Prints the job's end state as one JSON line, read from the trial's record:
``{"state": "done" | "needs_review" | "dead_lettered" | "pending", "external_ref",
"attempts", "last_error"}``. A job never seen is ``pending``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from orderdesk.record import status


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python3 status.py JOB_ID\n")
        return 2
    state_dir = Path(os.environ.get("CRASHPOINT_STATE_DIR") or os.getcwd()).resolve()
    print(json.dumps(status(state_dir / "orders.db", argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
