"""A worker that exits before its first failpoint is the reason, said as the exit it was.

It used to read "failpoint never reached ... check that the worker calls failpoint()",
which sent its author looking for a missing call in a worker that never ran.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from clikit import results, run

pytestmark = pytest.mark.process

CONFIG = """\
[target]
name = "exits-at-once"
command = ["{python}", "-c", "{worker}"]
enqueue = ["{python}", "-c", "pass", "{{job_id}}"]
lease_ttl_s = 0.5

[[providers]]
name = "billing"
kind = "idempotent"
"""


def test_a_worker_that_exits_at_once_is_the_reason(scratch: Path, tmp_path: Path) -> None:
    config = tmp_path / "crashpoint.toml"
    worker = "import sys; sys.stderr.write('boom: no DATABASE_URL set\\\\n'); sys.exit(4)"
    config.write_text(CONFIG.format(python=sys.executable, worker=worker))
    out = tmp_path / "out"
    cell = ["--scenario", "crash_before_external_call", "--signal", "SIGKILL"]
    done = run(["-c", str(config), *cell, "--out", str(out)], scratch)
    assert done.returncode == 3, done.stderr
    (trial,) = results(out)["trials"]
    assert trial["verdict"] == "inconclusive"
    reason = trial["reason"]
    assert "every worker exited first: w1 exit 4" in reason, reason
    assert "boom: no DATABASE_URL set" in reason, reason
    assert "check that the worker calls failpoint()" not in reason
