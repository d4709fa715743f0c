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
