"""One bytecode cache for the Python processes a run starts of its own.

Where ``PYTHONDONTWRITEBYTECODE`` is set (container images and CI jobs often set it),
every Python process compiles each module it imports from source, and nothing is kept:
a reference worker paid 27 ms of CPU at each start for that, a fake provider 20 ms, and
a demo starts some 150 workers and 30 providers. For the run's own processes the harness
keeps their bytecode in a directory of the run's (``PYTHONPYCACHEPREFIX``), removed with
the run: nothing is written beside the sources, which is what the setting asks for, and
every process after the first starts from bytecode. One process imports the worker's and
the providers' modules before the first trial, so the trials that start together do not
each compile them all.

A run of the user's own worker (``-c crashpoint.toml``) leaves its environment alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: What the reference worker, its relay and a fake provider import.
WARM_MODULES = (
    "scenarios.worker.loop",
    "scenarios.worker.reconcile",
    "scenarios.worker.relay",
    "scenarios.ledger.sqlite",
    "fake_providers.cli",
    "fake_providers.server",
)
_NO_BYTECODE = "PYTHONDONTWRITEBYTECODE"
_PREFIX = "PYTHONPYCACHEPREFIX"
#: The warm-up is a convenience: a run whose warm-up hangs goes on without it.
_WARM_TIMEOUT_S = 30.0


def wanted(env: os._Environ[str] | dict[str, str]) -> bool:
    """Whether processes started with ``env`` would compile every module each time."""
    return bool(env.get(_NO_BYTECODE)) and not env.get(_PREFIX)


@contextlib.contextmanager
def shared_bytecode(parent: Path | None = None) -> Iterator[Path | None]:
    """While open, processes this one starts keep their bytecode in one directory
    (yielded; None when Python writes bytecode anyway, and nothing changes)."""
    if not wanted(os.environ):
        yield None
        return
    cache = Path(tempfile.mkdtemp(prefix="cp-pycache-", dir=parent))
    saved = os.environ.pop(_NO_BYTECODE)
    os.environ[_PREFIX] = str(cache)
    try:
        yield cache
    finally:
        os.environ.pop(_PREFIX, None)
        os.environ[_NO_BYTECODE] = saved
        shutil.rmtree(cache, ignore_errors=True)


def start_warming() -> subprocess.Popen[bytes]:
    """One process that imports :data:`WARM_MODULES`, so their bytecode is in the cache
    before the trials' processes start; wait for it with :func:`finish_warming`."""
    code = f"import {', '.join(WARM_MODULES)}"
    return subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def finish_warming(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(_WARM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
