"""Fixtures of the process tier's CLI tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def private_redis_db(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A Redis database of the test's own on REDIS_URL, emptied when the test ends.

    The Redis examples keep their queues, locks and rq's worker registry under one
    namespace per trial and never delete them (a killed worker cannot, and the trial's
    directory that names the namespace is gone): without this a run left thousands of
    keys behind.
    """
    from rediskit import empty_db, private_url

    url = private_url(os.environ.get("PYTEST_XDIST_WORKER", ""))
    monkeypatch.setenv("REDIS_URL", url)
    yield url
    empty_db(url)


@pytest.fixture
def scratch() -> Iterator[Path]:
    """The run's TMPDIR: trial directories land here (short, for the failpoint socket)."""
    path = Path(tempfile.mkdtemp(prefix="cpn-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def marker() -> Iterator[str]:
    """A word in the argv of every process of a containment test's worker tree; whatever
    still carries it afterwards is killed, so a failed test leaks nothing."""
    from treekit import kill_leftovers, new_marker

    mark = new_marker()
    yield mark
    kill_leftovers(mark)
