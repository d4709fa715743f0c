"""Trial cost: wall time per trial, the harness's own overhead, and what a proxy adds.

Overhead is a trial's wall time less its deliberate waits (lease expiries, settle time,
quiescence polling): setup, teardown, provider start, rendezvous and oracle work.
"""

from __future__ import annotations

import statistics
import time

from benchmarks.stats import describe
from harness.contract.vocabulary import PROVIDER_KINDS
from harness.infra import RunInfra
from harness.plan import Cell
from harness.runner import run_cells, run_spec
from harness.trial import Driver, TrialConfig
from harness.trial_run import TrialResult
from scenarios.table import BY_NAME

REPEATS = 5


def _cells() -> list[Cell]:
    return [
        Cell(BY_NAME["crash_after_external_success"], "after_external_call", kind, "SIGKILL")
        for kind in PROVIDER_KINDS
    ] + [
        Cell(BY_NAME["crash_before_external_call"], "before_external_call", kind, "SIGKILL")
        for kind in ("idempotent", "plain")
    ]


class Proxied:
    """The run's trials, every one of them behind proxies of its own."""

    def __init__(self, infra: RunInfra) -> None:
        self.infra = infra
        self.abort = infra.abort

    def run_trial(self, cell: Cell, seed: int, driver: Driver) -> TrialResult:
        return self.infra.run_trial(cell, seed, driver, network=True)


def main() -> None:
    cells = _cells()
    config = TrialConfig()
    durations: list[float] = []
    overheads: list[float] = []
    proxied: list[float] = []
    direct: list[float] = []
    with RunInfra.open(
        [*cells, Cell(BY_NAME["reset_after_commit"], "toxic_reset_peer", "plain", None)],
        ledger="sqlite",
        backend="process",
        pg_dsn=None,
        config=config,
    ) as infra:
        for i in range(REPEATS):
            spec = run_spec(infra, cells, seed=i, command="bench", jobs=1, target={"name": "ref"})
            t0 = time.perf_counter()
            results = run_cells(spec)
            direct.append((time.perf_counter() - t0) / len(cells))
            durations += [r.duration_s for r in results]
            overheads += [r.timings["overhead_s"] for r in results]
            if infra.toxiproxy is not None:
                spec.trials = Proxied(infra)
                t0 = time.perf_counter()
                run_cells(spec)
                proxied.append((time.perf_counter() - t0) / len(cells))
    print(f"trial wall time: {describe(durations)}")
    print(f"harness overhead per trial: {describe(overheads)}")
    share = statistics.median(overheads) / statistics.median(durations)
    print(f"overhead share of a trial: {share:.0%}")
    if proxied:
        added = statistics.median(proxied) - statistics.median(direct)
        print(f"per-trial cost without a proxy: {describe(direct)}")
        print(f"per-trial cost through Toxiproxy: {describe(proxied)}")
        print(
            f"proxy adds {added * 1000:.1f} ms per trial (median), ratio "
            f"{statistics.median(proxied) / statistics.median(direct):.3f}"
        )
