"""python3 start.py SCRIPT [ARG ...]: import the heavy framework, then run SCRIPT.

The heavy target's start-up (benchmarks/bench_heavy.py): importing ``heavyframework``
(beside this file) costs half a second of CPU, then the test suite's pyqueue worker,
enqueue or status command (or serve.py here) runs as it always does. A worker forked
from a preloading process that imported it already (``[target.preload]``) skips the cost,
as a real framework's import would be skipped.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import heavyframework  # noqa: F401  (imported for its cost)

if __name__ == "__main__":
    script = Path(sys.argv[1])
    sys.argv = sys.argv[1:]
    sys.path.insert(0, str(script.parent))
    runpy.run_path(str(script), run_name="__main__")
