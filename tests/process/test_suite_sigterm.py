"""The test suite itself, stopped with SIGTERM (a cancelled CI job), leaves no process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]


def test_a_sigterm_to_the_test_run_still_tears_down_the_processes_a_test_started(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    # A fixture starts a process of its own and stops it at teardown, as the standalone
    # example tests do; the test then waits to be stopped.
    (tmp_path / "test_held.py").write_text(
        textwrap.dedent(
            f"""
            import subprocess, sys, time
            import pytest

            @pytest.fixture
            def child():
                proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
                try:
                    yield proc
                finally:
                    proc.kill()
                    proc.wait()

            def test_waits(child):
                with open({str(pids)!r}, "w") as f:
                    f.write(str(child.pid))
                time.sleep(600)
            """
        )
    )
    # Our conftest as the run's plugin, and no ini file: only the handler under test.
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest"]
    run = subprocess.Popen(
        [*argv, "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_held.py")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60.0
        while not (pids.exists() and pids.read_text()) and time.monotonic() < deadline:
            assert run.poll() is None, run.communicate()[0].decode(errors="replace")
            time.sleep(0.05)
        child = int(pids.read_text())
        assert psutil.pid_exists(child)
        run.send_signal(signal.SIGTERM)
        out, _ = run.communicate(timeout=60)
        assert run.returncode == 2, out.decode(errors="replace")  # pytest's "interrupted"
        assert not psutil.pid_exists(child), "the fixture's process outlived the test run"
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
