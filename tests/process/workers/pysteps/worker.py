"""python3 worker.py [--mutant NAME]: the reference worker, told where its ledger is (and,
with --mutant, which of its known bugs to plant)."""

from __future__ import annotations

import os
import sys

from ledger import DSN

os.environ["CRASHPOINT_LEDGER_DSN"] = DSN
if "--mutant" in sys.argv:
    os.environ["CRASHPOINT_MUTANT"] = sys.argv[sys.argv.index("--mutant") + 1]
# The harness signals this process: it must be the worker itself, not its parent.
os.execv(sys.executable, [sys.executable, "-m", "scenarios.worker"])  # noqa: S606 (fixed argv)
