"""Fixtures of the process tier's CLI tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


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
