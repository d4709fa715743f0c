"""A command target against the reference worker: median trial time on the same cells.

The command target is the test suite's third-party worker (tests/process/workers/pyqueue:
its own SQLite queue, a status command, two providers), run against the same scenarios,
points, provider kinds and signals as the reference worker, with the same lease, in one
run and in alternation, so the machine's load falls on both alike. The goal: at most 1.5
times the reference's median.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from benchmarks.stats import describe
from harness.infra import RunInfra
from harness.plan import Cell, cells
from harness.runner import run_cells, run_spec
from harness.targets.config import load_config
from harness.trial import TrialConfig
from scenarios.table import BY_NAME

REPEATS = 2
PYQUEUE = Path(__file__).resolve().parents[1] / "tests" / "process" / "workers" / "pyqueue"
#: (scenario, point, signal) run at an idempotent and a plain provider by both targets.
CELLS = (
    ("crash_before_external_call", "before_external_call", "SIGKILL"),
    ("crash_during_external_call", "provider_hold_before_commit", "SIGKILL"),
    ("crash_after_external_success", "after_external_call", "SIGKILL"),
    ("lease_expiry_slow_worker", "before_external_call", "SIGSTOP"),
    ("state_store_restore", "restore_after_effect", "SIGKILL"),
    ("provider_error_before_commit", "fail_once", None),
    ("provider_error_before_commit", "fail_past_cap", None),
    ("simultaneous_trigger", "same_moment", None),
)
KINDS = ("idempotent", "plain")


def _pick(all_cells: list[Cell]) -> list[Cell]:
    wanted = {(s, p, k, sig) for s, p, sig in CELLS for k in KINDS}
    return [c for c in all_cells if (c.scenario.name, c.point, c.provider, c.signal) in wanted]


def main() -> None:
    command = load_config(PYQUEUE / "crashpoint.toml")
    declared = [(p.name, p.kind) for p in command.providers]
    scenarios = [BY_NAME[s] for s in dict.fromkeys(s for s, _, _ in CELLS)]
    reference = _pick(cells(scenarios))
    theirs = _pick(cells(scenarios, declared=declared))
    assert len(reference) == len(theirs) == len(CELLS) * len(KINDS)
    config = TrialConfig(lease_ttl_s=command.lease_ttl_s, http_timeout_s=command.lease_ttl_s)
    durations: dict[str, list[float]] = {"reference": [], "command": []}
    held: dict[str, int] = {"reference": 0, "command": 0}
    open_ref = RunInfra.open(
        reference, ledger="sqlite", backend="process", pg_dsn=None, config=config
    )
    open_cmd = RunInfra.open(
        theirs, ledger="sqlite", backend="process", pg_dsn=None, command=command, config=config
    )
    with open_ref as ref_infra, open_cmd as cmd_infra:
        for i in range(REPEATS):
            for name, infra, chosen in (
                ("reference", ref_infra, reference),
                ("command", cmd_infra, theirs),
            ):
                spec = run_spec(
                    infra, chosen, seed=i, command="bench", jobs=1, target={"name": name}
                )
                results = run_cells(spec)
                durations[name] += [r.duration_s for r in results]
                held[name] += sum(r.verdict == "held" for r in results)
    for name, values in durations.items():
        print(f"{name} trial wall time ({held[name]}/{len(values)} held): {describe(values)}")
    ratio = statistics.median(durations["command"]) / statistics.median(durations["reference"])
    print(f"command target / reference, median trial time: {ratio:.2f} (goal <= 1.5)")
