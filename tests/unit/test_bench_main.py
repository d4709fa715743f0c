"""``python -m benchmarks``: its help lists every benchmark, and a wrong name is refused."""

from __future__ import annotations

import pytest

from benchmarks.__main__ import main


def test_help_lists_every_benchmark_with_what_it_measures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m benchmarks [NAME ...]")
    for name in ("heavy", "speed", "detection", "reports"):
        assert f"\n  {name}\n" in out
    assert "0.5 s of CPU" in out  # the heavy benchmark's docstring, not only its name


def test_an_unknown_name_is_refused_in_one_line_and_nothing_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["speed", "nope"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # "speed" did not start either
    assert captured.err.startswith("unknown benchmark 'nope'; choose from ")
    assert captured.err.count("\n") == 1
