"""Clock skew through libfaketime: a worker's wall clock stepped past its lease, on real
workers (processes and containers) stopped with real signals."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trialkit import describe, events, run_cell

from harness import faketime as libfaketime

pytestmark = pytest.mark.process

BEHIND = ("clock_skew", "worker_behind", "plain", "SIGSTOP")
AHEAD = ("clock_skew", "worker_ahead", "plain", "SIGSTOP")


@pytest.fixture(autouse=True)
def faketime(pytestconfig: pytest.Config) -> None:
    from harness.pytest_plugin import missing

    why = libfaketime.unavailable()
    if why is not None:
        missing(pytestconfig, f"{why}; run scripts/install-infra.sh faketime")


def docker_engine(pytestconfig: pytest.Config) -> None:
    from harness.pytest_plugin import missing

    try:
        import docker

        docker.from_env(timeout=5).ping()
    except Exception as exc:
        missing(pytestconfig, f"Docker engine ({exc}); run scripts/install-infra.sh docker")


@pytest.mark.parametrize("step", [0.0, -3600.0, 3600.0])
def test_a_skewed_python_worker_can_still_sleep(tmp_path: Path, step: float) -> None:
    """libfaketime alone fails Python 3.11's time.sleep (an absolute monotonic
    clock_nanosleep) with EINVAL; with the shim preloaded first the sleep is whole."""
    from harness import faketime_shim

    lib = libfaketime.library()
    assert lib is not None
    offset = tmp_path / "offset"
    libfaketime.set_offset(offset, step)
    code = "import time; t = time.monotonic(); time.sleep(0.05); print(time.monotonic() - t)"

    def sleep_under(shim: Path) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, **libfaketime.worker_env(offset, lib, shim)}
        argv = [sys.executable, "-c", code]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)

    shimmed = sleep_under(faketime_shim.beside(tmp_path))
    assert shimmed.returncode == 0, shimmed.stderr
    assert float(shimmed.stdout) >= 0.05


def test_a_step_moves_the_wall_clock_of_a_running_worker_and_not_its_monotonic(
    tmp_path: Path,
) -> None:
    lib = libfaketime.library()
    assert lib is not None
    offset = tmp_path / "offset"
    libfaketime.set_offset(offset, 0.0)
    code = (
        "import sys, time\n"
        "for line in sys.stdin:\n"
        "    print(time.time() - time.monotonic(), flush=True)\n"
    )
    env = {**os.environ, **libfaketime.worker_env(offset, lib)}
    with subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as worker:

        def reading() -> float:
            assert worker.stdin is not None
            assert worker.stdout is not None
            worker.stdin.write("\n")
            worker.stdin.flush()
            return float(worker.stdout.readline())

        ours = time.time() - time.monotonic()
        before = reading()
        libfaketime.set_offset(offset, -30.0)
        after = reading()
        assert worker.stdin is not None
        worker.stdin.close()
    # The wall clock moved by the step; the monotonic clock (the ledger's) did not.
    assert abs(before - ours) < 1.0
    assert abs((after - before) + 30.0) < 1.0


@pytest.mark.parametrize("cell", [BEHIND, AHEAD], ids=["behind", "ahead"])
def test_the_reference_worker_holds_whichever_way_its_clock_went(
    cell: tuple[str, str, str, str],
) -> None:
    r = run_cell(*cell)
    assert r.verdict == "held", describe(r)
    assert r.reached
    (step,) = events(r, "note", worker="w1")
    assert (step["fields"]["clock_offset_s"] < 0) == (cell[1] == "worker_behind")
    # The thawed owner checked its lease at the ledger and never called out again.
    assert not events(r, "arrival", source="provider:svc", worker_id="w1", committed=True)[1:]


def test_a_worker_trusting_its_own_clock_calls_out_under_a_stale_token() -> None:
    bad = run_cell(*BEHIND, mutant="lease_by_worker_clock")
    assert bad.verdict == "violated", describe(bad)
    assert "fenced_writes" in {v.invariant for v in bad.violations}
    # Without the step, the same mutant keeps time well enough to stop: the skew did it.
    ahead = run_cell(*AHEAD, mutant="lease_by_worker_clock")
    assert ahead.verdict == "held", describe(ahead)


@pytest.mark.docker
def test_in_containers_too(pytestconfig: pytest.Config) -> None:
    docker_engine(pytestconfig)
    r = run_cell(*BEHIND, backend="docker")
    assert r.verdict == "held", describe(r)
    bad = run_cell(*BEHIND, backend="docker", mutant="lease_by_worker_clock")
    assert bad.verdict == "violated", describe(bad)
    assert "fenced_writes" in {v.invariant for v in bad.violations}
