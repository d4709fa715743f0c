"""A sleep on the monotonic clock kept whole under libfaketime.

libfaketime 0.9.10 (Debian 12's) mistranslates an absolute ``clock_nanosleep`` on
``CLOCK_MONOTONIC`` even when told to leave that clock alone
(``FAKETIME_DONT_FAKE_MONOTONIC=1``): it hands the kernel a negative deadline, and the
call fails with EINVAL (upstream issue 426, fixed after that release). Python 3.11 and
later sleep exactly that way, so every ``time.sleep`` of a skewed Python worker raises
``OSError: [Errno 22]`` and the worker dies before the cell is reached: a correct worker's
clock cells ended inconclusive for the harness's doing.

The shim is a few lines of C preloaded before libfaketime: a monotonic or boot-time sleep
goes straight to the kernel, any other goes on to libfaketime. It is built once with the
machine's C compiler into crashpoint's cache; where there is none, :func:`build` says why,
and :func:`harness.faketime.unavailable` reports that clock cells cannot run here.
"""

from __future__ import annotations

import functools
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.cachedir import cache_root

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int clock_nanosleep(clockid_t clock_id, int flags, const struct timespec *req,
                    struct timespec *rem) {
    if (clock_id == CLOCK_MONOTONIC || clock_id == CLOCK_MONOTONIC_RAW ||
        clock_id == CLOCK_BOOTTIME) {
        /* The clock libfaketime was told to leave whole: the kernel's own sleep. */
        return syscall(SYS_clock_nanosleep, clock_id, flags, req, rem) == 0 ? 0 : errno;
    }
    static int (*next)(clockid_t, int, const struct timespec *, struct timespec *);
    if (next == NULL) {
        next = dlsym(RTLD_NEXT, "clock_nanosleep");
    }
    return next(clock_id, flags, req, rem);
}
"""

#: The shim's file name where a trial uses it (beside the worker's offset file).
NAME = "cp-monotonic-sleep.so"


class ShimUnavailable(Exception):
    """The shim cannot be built here (no C compiler, or it failed)."""


@functools.cache
def build() -> Path:
    """The shim's shared object, built once per source into crashpoint's cache."""
    digest = hashlib.sha256(SOURCE.encode()).hexdigest()[:16]
    target = cache_root() / "faketime" / f"monotonic-sleep-{digest}.so"
    if target.is_file():
        return target
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise ShimUnavailable("no C compiler (cc) to build it; `apt-get install gcc`")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cp-shim-", dir=target.parent) as tmp:
        src = Path(tmp) / "shim.c"
        src.write_text(SOURCE, encoding="utf-8")
        out = Path(tmp) / "shim.so"
        done = subprocess.run(
            [cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(src), "-ldl"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ShimUnavailable(f"{cc} failed to build it: {last}")
        # Atomic: two runs building at once each leave a whole file.
        out.replace(target)
    return target


def beside(directory: Path) -> Path:
    """A copy of the shim in ``directory`` (a trial's, which its containers see too)."""
    copy = directory / NAME
    shutil.copyfile(build(), copy)
    return copy
