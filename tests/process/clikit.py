"""Run the real ``crashpoint`` CLI in a subprocess and read what it leaves behind."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]
CLI_TIMEOUT_S = 120
#: ``-j`` of the tests that run a worker's whole matrix: below the default width (8 on two
#: cores) so that a CI machine that is busy besides stays clear of the examples' short
#: leases (each held at 4 under ``stress-ng --cpu 2``), and above 2, which took a third
#: longer than 4 on each example (rq 77 s against 49 s, quiet).
MATRIX_JOBS = "4"


def cli() -> list[str]:
    """This interpreter's ``crashpoint`` entry point, or the same ``main`` run by it."""
    beside = Path(sys.executable).with_name("crashpoint")
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())"]


def run(
    args: list[str],
    scratch: Path,
    *,
    timeout_s: float = CLI_TIMEOUT_S,
    command: str = "run",
    cwd: Path = ROOT,
) -> subprocess.CompletedProcess[str]:
    """``crashpoint COMMAND ARGS`` (``run`` unless told) in ``cwd`` (the checkout unless
    told), with trial directories under ``scratch`` (TMPDIR)."""
    env = {**os.environ, "TMPDIR": str(scratch)}
    return subprocess.run(
        [*cli(), command, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def leftovers(scratch: Path) -> list[str]:
    """Processes that still live in (or were started for) this run's trial directories."""
    out = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            where = proc.cwd()
            state = proc.environ().get("CRASHPOINT_STATE_DIR", "")
            if where.startswith(str(scratch)) or state.startswith(str(scratch)):
                out.append(f"{proc.pid} {' '.join(proc.info['cmdline'] or [])}")
    return out


def results(out: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((out / "results.json").read_text())
    return doc
