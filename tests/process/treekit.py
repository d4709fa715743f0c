"""Worker trees that try to escape, for the containment tests of both backends.

``TICK`` is one program that can ignore SIGTERM, double-fork a ``setsid`` daemon, start a
chain of children that start children, and exit early; every process of the tree ticks
a counter file named for its role and carries the test's marker in its argv, so the
tests can see each one progress and find any that outlived the trial.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from harness.backends.base import Backend
from harness.history import History

TICK = r"""
import os, signal, subprocess, sys, time
marker, role, *opts = sys.argv[1:]
keep = ["--ignore-term"] if "--ignore-term" in opts else []
if keep:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
elif "--exit-on-term" in opts:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
if "--daemon" in opts:
    # The classic daemon: fork, setsid, fork again, the middle one exits at once.
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, __file__, marker, role + "-daemon", *keep])
        os._exit(0)
    os.wait()
if "--spawn" in opts:
    depth = int(opts[opts.index("--spawn") + 1])
    if depth:
        subprocess.Popen([sys.executable, __file__, marker, role + "-child", *keep,
                          "--spawn", str(depth - 1)])
if "--exit" in opts:
    sys.exit(0)
n = 0
while True:
    n += 1
    with open(role + ".count.tmp", "w") as f:
        f.write(str(n))
    os.replace(role + ".count.tmp", role + ".count")
    time.sleep(0.005)
"""

#: The roles of a worker started with ``--spawn 2``.
CHAIN = ["w", "w-child", "w-child-child"]


def new_marker() -> str:
    return f"cp-tree-{uuid.uuid4().hex[:12]}"


def tick_argv(workdir: Path, marker: str, *opts: str) -> list[str]:
    """The worker's argv (role ``w``); writes the program into ``workdir`` first."""
    (workdir / "tick.py").write_text(TICK)
    return [sys.executable, str(workdir / "tick.py"), marker, "w", *opts]


def start_tree(
    backend: Backend, workdir: Path, marker: str, *opts: str, roles: list[str] | None = None
) -> Any:
    """Start worker ``w1`` as ``TICK`` with ``opts``; wait until ``roles`` tick."""
    handle = backend.start(
        "w1", tick_argv(workdir, marker, *opts), env=dict(os.environ), cwd=workdir
    )
    if roles:
        ticking(workdir, roles)
    return handle


def marked(marker: str) -> list[psutil.Process]:
    """Every live (not zombie) process on the machine whose argv carries ``marker``."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if any(marker in arg for arg in proc.info["cmdline"] or ()):
            found.append(proc)
    return found


def kill_leftovers(marker: str) -> None:
    """A failed test must not leave its tree running for the next one."""
    for proc in marked(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)


def counts(workdir: Path, roles: list[str]) -> dict[str, int]:
    return {role: int((workdir / f"{role}.count").read_text() or 0) for role in roles}


def until(pred: Callable[[], object], timeout_s: float = 10.0, *, what: str) -> None:
    """Poll ``pred`` until true; fail naming ``what`` after ``timeout_s`` (generous: the
    machine runs several test trees at once, and a slow start is not what is tested)."""
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def ticking(workdir: Path, roles: list[str]) -> None:
    """Wait until every role has ticked at least twice (it runs its loop)."""

    def ready() -> bool:
        try:
            return all(n >= 2 for n in counts(workdir, roles).values())
        except (FileNotFoundError, ValueError):
            return False

    until(ready, what=f"every process of the tree to tick: {roles}")


def ticks_again(workdir: Path, roles: list[str]) -> None:
    """Wait until every role has ticked since now (it was thawed)."""
    before = counts(workdir, roles)
    until(
        lambda: all(n > before[r] for r, n in counts(workdir, roles).items()),
        what=f"every process to tick again: {roles}",
    )


def cpu_s(procs: list[psutil.Process]) -> float:
    total = 0.0
    for proc in procs:
        times = proc.cpu_times()
        total += times.user + times.system
    return total


def assert_frozen(workdir: Path, roles: list[str], procs: list[psutil.Process]) -> None:
    """Neither the counters nor the CPU time of ``procs`` advance for a while."""
    before, cpu_before = counts(workdir, roles), cpu_s(procs)
    time.sleep(0.3)  # the worker ticks every 5 ms: 0.3 s is some 60 ticks it must not make
    assert counts(workdir, roles) == before, "a paused process kept ticking"
    assert cpu_s(procs) == cpu_before, "a paused process kept using the CPU"


def fields_of(history: History | None, kind: str) -> list[dict[str, Any]]:
    """The fields of every event of ``kind`` the backend recorded."""
    assert history is not None
    return [e.fields for e in history if e.kind == kind]
