"""The run's own processes share one bytecode cache where Python would keep none."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness import bytecode


def test_without_bytecode_the_run_gives_its_processes_a_cache_kept_between_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setenv("CRASHPOINT_CACHE", str(tmp_path))
    with bytecode.shared_bytecode() as cache:
        assert cache == tmp_path / f"bytecode-{sys.implementation.cache_tag}"
        assert cache.is_dir()
        assert os.environ["PYTHONPYCACHEPREFIX"] == str(cache)
        assert "PYTHONDONTWRITEBYTECODE" not in os.environ
        (cache / "x.pyc").write_bytes(b"")
    assert (cache / "x.pyc").exists(), "the next run starts from it"
    assert os.environ["PYTHONDONTWRITEBYTECODE"] == "1"
    assert "PYTHONPYCACHEPREFIX" not in os.environ


@pytest.mark.parametrize(
    "env",
    [
        {},  # Python writes bytecode beside the sources already
        {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/elsewhere"},  # a choice
    ],
)
def test_otherwise_the_environment_is_left_as_it_is(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    for name in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    before = dict(os.environ)
    with bytecode.shared_bytecode() as cache:
        assert cache is None
        assert dict(os.environ) == before
    assert dict(os.environ) == before


def test_a_cache_that_cannot_be_made_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    before = dict(os.environ)
    with bytecode.shared_bytecode(blocked / "cache") as cache:
        assert cache is None
        assert dict(os.environ) == before
