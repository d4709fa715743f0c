"""``crashpoint check-config`` calls the target's commands in every order a run does:
status before the job's first enqueue, the enqueue before any worker is up, and the same
job id enqueued twice. A command that fails in one of them fails the check, with the
last lines of its stderr; a queue that refuses the duplicate and says so passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clikit import ROOT, leftovers, run

pytestmark = pytest.mark.process

PYQUEUE = ROOT / "tests" / "process" / "workers" / "pyqueue"
#: An enqueue that inserts with the job id as its primary key: the second one fails.
STRICT_ENQUEUE = """
import json, os, sqlite3, subprocess, sys
db = sqlite3.connect(os.path.join(os.environ["CRASHPOINT_STATE_DIR"], "ids.db"))
db.execute("CREATE TABLE IF NOT EXISTS ids (job_id TEXT PRIMARY KEY)")
db.execute("INSERT INTO ids VALUES (?)", (sys.argv[1],))
db.commit()
sys.exit(subprocess.call([sys.executable, sys.argv[3], *sys.argv[1:3]]))
"""
#: A status command that fails for a job its queue does not hold yet.
STRICT_STATUS = """
import os, subprocess, sys
if not os.path.exists(os.path.join(os.environ["CRASHPOINT_STATE_DIR"], "queue.db")):
    sys.exit("status: no such queue for " + sys.argv[1])
sys.exit(subprocess.call([sys.executable, sys.argv[2], sys.argv[1]]))
"""


def target(tmp_path: Path, *, enqueue: str, status: str) -> Path:
    toml = tmp_path / "crashpoint.toml"
    toml.write_text(
        f"""[target]
name = "pyqueue-orders"
command = ["python3", "{PYQUEUE / "worker.py"}"]
workers = 2
lease_ttl_s = 0.6
enqueue = {enqueue}
status = {status}
max_attempts = 6
[[providers]]
name = "billing"
kind = "idempotent"
"""
    )
    return toml


def check(toml: Path, scratch: Path) -> tuple[int, str]:
    done = run(["-c", str(toml), "--timeout-s", "10"], scratch, command="check-config")
    assert leftovers(scratch) == []
    return done.returncode, done.stdout


def enqueue_argv(*extra: str) -> str:
    args = [str(PYQUEUE / "enqueue.py"), "{job_id}", "{payload_file}", *extra]
    return "[" + ", ".join(f'"{a}"' for a in ["python3", *args]) + "]"


STATUS = f'["python3", "{PYQUEUE / "status.py"}", "{{job_id}}"]'


def test_an_enqueue_that_fails_on_the_same_job_id_fails_the_check(
    scratch: Path, tmp_path: Path
) -> None:
    script = tmp_path / "strict_enqueue.py"
    script.write_text(STRICT_ENQUEUE)
    enqueue = (
        f'["python3", "{script}", "{{job_id}}", "{{payload_file}}", "{PYQUEUE / "enqueue.py"}"]'
    )
    code, out = check(target(tmp_path, enqueue=enqueue, status=STATUS), scratch)
    assert code == 2, out
    flat = " ".join(out.split())
    assert "✗ enqueue of j-0001 a second time (same job id) failed" in flat, out
    # The traceback's last line, its message, not its first.
    assert "UNIQUE constraint failed: ids.job_id" in flat, out
    assert '{"queued": false}' in flat, out


def test_a_status_command_that_fails_before_the_first_enqueue_fails_the_check(
    scratch: Path, tmp_path: Path
) -> None:
    script = tmp_path / "strict_status.py"
    script.write_text(STRICT_STATUS)
    status = f'["python3", "{script}", "{{job_id}}", "{PYQUEUE / "status.py"}"]'
    code, out = check(target(tmp_path, enqueue=enqueue_argv(), status=status), scratch)
    assert code == 2, out
    flat = " ".join(out.split())
    assert "✗ before the first enqueue, status failed" in flat, out
    assert "status: no such queue for j-0001" in flat, out


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ((), "enqueue of j-0001 a second time: exit 0, queued again"),
        (
            ("--refuse-known",),
            'enqueue of j-0001 a second time: the queue refused it ({"queued": false})',
        ),
    ],
)
def test_a_queue_that_takes_or_refuses_the_duplicate_passes(
    scratch: Path, tmp_path: Path, flag: tuple[str, ...], said: str
) -> None:
    code, out = check(target(tmp_path, enqueue=enqueue_argv(*flag), status=STATUS), scratch)
    assert code == 0, out
    flat = " ".join(out.split())
    assert "✓ before the first enqueue, status says pending" in flat, out
    assert "✓ enqueue queued job j-0001, before any worker was up" in flat, out
    assert f"✓ {said}" in flat, out
    assert "✓ exactly one effect for j-0001" in flat, out
