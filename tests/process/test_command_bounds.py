"""A target's command is given its bound plus the time it waited for a CPU, and no more:
real child processes, with the CPU counts read from a stand-in for the kernel's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.cpu_wait import Read
from harness.targets.bounded import Overran, run_bounded

pytestmark = pytest.mark.process

SLEEP = [
    sys.executable,
    "-S",
    "-c",
    "import sys, time; time.sleep(float(sys.argv[1])); print('ok')",
]


def _starved(seconds: float) -> Read:
    """Every task of the command has waited ``seconds`` for a CPU."""
    return lambda pid: {pid: int(seconds * 1e9)}


def test_a_command_within_its_bound_is_answered(tmp_path: Path) -> None:
    done = run_bounded([*SLEEP, "0"], cwd=tmp_path, env=None, timeout_s=10)
    assert (done.returncode, done.stdout.strip()) == (0, b"ok")


def test_a_command_that_sleeps_past_its_bound_is_killed_and_overran(tmp_path: Path) -> None:
    with pytest.raises(Overran) as caught:
        run_bounded([*SLEEP, "30"], cwd=tmp_path, env=None, timeout_s=0.2, read=_starved(0))
    assert caught.value.more_s == 0


def test_a_starved_command_is_waited_for_as_long_as_it_was_starved(tmp_path: Path) -> None:
    # It ends 0.6 s in (and a start-up): past its 0.2 s bound, within the 20 s it waited.
    done = run_bounded([*SLEEP, "0.6"], cwd=tmp_path, env=None, timeout_s=0.2, read=_starved(20))
    assert done.stdout.strip() == b"ok"


def test_the_stretch_is_capped(tmp_path: Path) -> None:
    with pytest.raises(Overran) as caught:
        run_bounded(
            [*SLEEP, "30"], cwd=tmp_path, env=None, timeout_s=0.2, most_s=0.3, read=_starved(99)
        )
    assert caught.value.more_s == pytest.approx(0.3)
