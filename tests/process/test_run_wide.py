"""Width and load: the default concurrency judges like a serial run, and the reference
worker's short lease gives no false alarm with both cores busy."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence

import pytest
from trialkit import describe

from harness.infra import RunInfra
from harness.plan import Cell, select_cells
from harness.runner import run_cells, run_spec
from harness.trial_run import TrialResult

pytestmark = pytest.mark.process

#: Cells whose timing hangs on the lease: kills that leave a job to be reclaimed, a
#: stopped owner outlived by its lease, a request held while its worker dies, and
#: provider faults retried within it.
LEASE_BOUND = (
    "crash_before_external_call",
    "crash_after_external_success",
    "crash_during_external_call",
    "lease_expiry_slow_worker",
    "provider_error_before_commit",
    "duplicate_delivery",
    "simultaneous_trigger",
)


def run(cells: Sequence[Cell], *, jobs: int | None, seed: int) -> list[TrialResult]:
    with RunInfra.open(cells, ledger="sqlite", backend="process", pg_dsn=None) as infra:
        spec = run_spec(
            infra,
            cells,
            seed=seed,
            command="test",
            jobs=jobs,
            target={"name": "reference"},
        )
        return run_cells(spec)


@contextlib.contextmanager
def both_cores_busy() -> Iterator[None]:
    """stress-ng on every core (busy loops where it is missing), stopped after."""
    cores = os.cpu_count() or 2
    if shutil.which("stress-ng"):
        argv = ["stress-ng", "--cpu", str(cores), "--timeout", "600s", "--quiet"]
    else:
        loop = f"import os\nfor _ in range({cores} - 1): os.fork()\nwhile True: pass"
        argv = [sys.executable, "-c", loop]
    proc = subprocess.Popen(argv, start_new_session=True)
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_the_default_width_judges_a_matrix_as_a_serial_run_does() -> None:
    cells = select_cells(scenarios=["crash_after_external_success", "lease_expiry_slow_worker"])
    serial = run(cells, jobs=1, seed=5)
    wide = run(cells, jobs=None, seed=5)
    assert [r.cell.id for r in wide] == [r.cell.id for r in serial]
    for one, many in zip(serial, wide, strict=True):
        assert (many.verdict, many.reached, many.violations) == (
            one.verdict,
            one.reached,
            one.violations,
        ), f"{describe(one)}\n--- at the default width:\n{describe(many)}"
        assert many.verdict == "held", describe(many)


def test_a_loaded_machine_gives_the_correct_worker_no_false_alarm() -> None:
    cells = select_cells(scenarios=list(LEASE_BOUND))
    with both_cores_busy():
        results = run(cells, jobs=None, seed=7)
    violated = [describe(r) for r in results if r.verdict == "violated"]
    assert not violated, "\n\n".join(violated)
    unsure = [f"{r.cell.id}: {r.reason}" for r in results if r.verdict != "held"]
    assert not unsure, "\n".join(unsure)
