"""python3 worker.py: the reference worker, told where its ledger is."""

from __future__ import annotations

import os
import sys

from ledger import DSN

os.environ["CRASHPOINT_LEDGER_DSN"] = DSN
# The harness signals this process: it must be the worker itself, not its parent.
os.execv(sys.executable, [sys.executable, "-m", "scenarios.worker"])  # noqa: S606 (fixed argv)
