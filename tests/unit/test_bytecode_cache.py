"""The run's own processes share one bytecode cache where Python would keep none."""

from __future__ import annotations

import os

import pytest

from harness import bytecode


def test_without_bytecode_the_run_gives_its_processes_a_cache_and_takes_it_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    with bytecode.shared_bytecode() as cache:
        assert cache is not None
        assert cache.is_dir()
        assert os.environ["PYTHONPYCACHEPREFIX"] == str(cache)
        assert "PYTHONDONTWRITEBYTECODE" not in os.environ
        (cache / "x.pyc").write_bytes(b"")
    assert not cache.exists(), "the cache goes with the run"
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
