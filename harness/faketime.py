"""A worker's own wall clock, offset on demand: libfaketime through ``LD_PRELOAD``.

Each skewed worker gets its own offset file (``FAKETIME_TIMESTAMP_FILE``), read again at
every call (``FAKETIME_NO_CACHE=1``), so the harness can step one worker's clock back or
ahead while it runs, as an NTP step or a wrong host clock would.

What is faked: the wall clock (``time.time()``, ``datetime.now()``, ``Date.now()``).
What is not: ``CLOCK_MONOTONIC``. libfaketime fakes it too by default (it then reports a
wall-like value, offset like the wall clock), but on one Linux machine that clock is the
one every process shares: the ledger's leases, the providers' arrivals and the trial
history are all in it, so it stands for the clock of the ledger's server, the time
authority a correct worker defers to. ``FAKETIME_DONT_FAKE_MONOTONIC=1`` keeps it whole;
what the scenario tests is a worker that trusts its own wall clock instead.

The library is found where Debian's ``libfaketime`` puts it (``CRASHPOINT_FAKETIME_LIB``
names another). :func:`unavailable` says why it cannot be used here, or None: the cells
that need it are then ``skipped`` with that reason, never passed. Containers of the
docker backend see the host's ``/usr`` read-only, so the same path loads there too.
"""

from __future__ import annotations

import functools
import glob
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import faketime_shim

LIB_VAR = "CRASHPOINT_FAKETIME_LIB"
_CANDIDATES = (
    "/usr/lib/*-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)
#: The probe's offset: far enough that no scheduling delay can fake it.
_PROBE_OFFSET_S = 86_400.0
_PROBE_SLACK_S = 30.0


def library() -> str | None:
    """The libfaketime shared object to preload, or None when there is none."""
    named = os.environ.get(LIB_VAR)
    if named:
        return named if Path(named).is_file() else None
    for pattern in _CANDIDATES:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def offset_text(seconds: float) -> str:
    """An offset as libfaketime reads it from its file: ``+12.5`` or ``-30``."""
    return f"{seconds:+g}"


def worker_env(offset_file: Path, lib: str, shim: Path | None = None) -> dict[str, str]:
    """The variables that give one worker the wall clock ``offset_file`` says; ``shim``
    (:mod:`harness.faketime_shim`) is preloaded first, so its monotonic sleep wins."""
    return {
        "LD_PRELOAD": f"{shim} {lib}" if shim is not None else lib,
        "FAKETIME_TIMESTAMP_FILE": str(offset_file),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


def set_offset(offset_file: Path, seconds: float) -> None:
    """Step the clock of every worker reading ``offset_file`` (atomically: a worker that
    reads a half-written file would see no offset at all)."""
    tmp = offset_file.with_suffix(".tmp")
    tmp.write_text(offset_text(seconds) + "\n", encoding="utf-8")
    tmp.replace(offset_file)


@functools.cache
def unavailable() -> str | None:
    """Why libfaketime cannot skew a worker's clock here, or None when it can.

    Checked by running an interpreter under it, with the shim that keeps its monotonic
    sleeps whole: the library must load, move the wall clock by the offset asked for,
    leave the monotonic clock alone, and let the interpreter sleep.
    """
    lib = library()
    if lib is None:
        return (
            "libfaketime is not installed (no libfaketime.so.1 under /usr/lib; "
            f"`scripts/install-infra.sh faketime`, or set {LIB_VAR})"
        )
    try:
        shim = faketime_shim.build()
    except faketime_shim.ShimUnavailable as exc:
        return f"the shim that keeps a skewed worker's sleeps working cannot be built: {exc}"
    with tempfile.TemporaryDirectory(prefix="cp-faketime-") as tmp:
        offset = Path(tmp) / "offset"
        set_offset(offset, -_PROBE_OFFSET_S)
        env = {**os.environ, **worker_env(offset, lib, shim)}
        code = "import time; time.sleep(0.001); print(time.time(), time.monotonic())"
        try:
            done = subprocess.run(
                [sys.executable, "-c", code],
                env=env,
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            )
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                return f"a Python under libfaketime at {lib} failed: {last}"
            wall, mono = (float(x) for x in done.stdout.split())
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            return f"libfaketime at {lib} could not be loaded: {type(exc).__name__}: {exc}"
    skew = wall - time.time()
    if abs(skew + _PROBE_OFFSET_S) > _PROBE_SLACK_S:
        return f"libfaketime at {lib} loaded but did not move the wall clock (off by {skew:.0f} s)"
    if abs(mono - time.monotonic()) > _PROBE_SLACK_S:
        return f"libfaketime at {lib} faked the monotonic clock too; the ledger's clock would drift"
    return None
