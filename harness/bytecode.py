"""One bytecode cache for the Python processes a run starts of its own.

Where ``PYTHONDONTWRITEBYTECODE`` is set (container images and CI jobs often set it),
every Python process compiles each module it imports from source, and nothing is kept:
a reference worker paid 27 ms of CPU at each start for that, a fake provider 20 ms, and
a demo starts some 150 workers and 30 providers. The run's own processes keep their
bytecode in crashpoint's cache instead (``PYTHONPYCACHEPREFIX``, under
:func:`harness.cachedir.cache_root`): nothing is written beside the sources, which is
what the setting asks for, and every process after the first ever starts from bytecode.
The cache is kept between runs (a run's first trials would otherwise all compile the
same modules at once); it holds a few MB per checkout and is safe to delete.

A run of the user's own worker (``-c crashpoint.toml``) leaves its environment alone.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from harness.cachedir import cache_root

_NO_BYTECODE = "PYTHONDONTWRITEBYTECODE"
_PREFIX = "PYTHONPYCACHEPREFIX"


def wanted(env: Mapping[str, str]) -> bool:
    """Whether processes started with ``env`` would compile every module each time."""
    return bool(env.get(_NO_BYTECODE)) and not env.get(_PREFIX)


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The bytecode cache, one per Python version (a .pyc names its own, too)."""
    return cache_root(env) / f"bytecode-{sys.implementation.cache_tag}"


@contextlib.contextmanager
def shared_bytecode(cache: Path | None = None) -> Iterator[Path | None]:
    """While open, processes this one starts keep their bytecode in ``cache`` (default
    :func:`cache_dir`), which is yielded; None when Python writes bytecode anyway, or
    the cache cannot be made, and nothing changes."""
    if not wanted(os.environ):
        yield None
        return
    cache = cache or cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        yield None  # a read-only home: every process compiles, as before
        return
    saved = os.environ.pop(_NO_BYTECODE)
    os.environ[_PREFIX] = str(cache)
    try:
        yield cache
    finally:
        os.environ.pop(_PREFIX, None)
        os.environ[_NO_BYTECODE] = saved
