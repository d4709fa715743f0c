"""Run single cells of the matrix from tests, and read their timelines."""

from __future__ import annotations

from typing import Any

from harness.infra import RunInfra
from harness.plan import Cell
from harness.runner import run_one, run_spec
from harness.trial import TrialConfig
from harness.trial_run import TrialResult
from scenarios.table import BY_NAME


def run_cell(
    scenario: str,
    point: str,
    provider: str,
    signal: str | None = None,
    *,
    ledger: str = "sqlite",
    backend: str = "process",
    mutant: str | None = None,
    pg_dsn: str | None = None,
    seed: int = 11,
    config: TrialConfig | None = None,
) -> TrialResult:
    cell = Cell(BY_NAME[scenario], point, provider, signal, ledger, backend, mutant)
    config = config or TrialConfig(pg_dsn=pg_dsn)
    with RunInfra.open(
        [cell], ledger=ledger, backend=backend, pg_dsn=pg_dsn, config=config
    ) as infra:
        spec = run_spec(
            infra, [cell], seed=seed, command="test", jobs=1, target={"name": "reference"}
        )
        return run_one(spec, cell)


def events(trial: TrialResult, kind: str, **match: Any) -> list[dict[str, Any]]:
    """The trial's events of ``kind`` whose fields (or job/source) match ``match``."""
    out = []
    for e in trial.events:
        if e["kind"] != kind:
            continue
        merged = {**e["fields"], "job": e["job"], "source": e["source"]}
        if all(merged.get(k) == v for k, v in match.items()):
            out.append(e)
    return out


def writes(result: TrialResult, job: str = "j-0001") -> list[dict[str, Any]]:
    return events(result, "arrival", job=job)


def lookups(result: TrialResult, job: str = "j-0001") -> list[dict[str, Any]]:
    return [e for e in events(result, "reconcile", job=job) if e["source"].startswith("provider")]


def effects(result: TrialResult, job: str = "j-0001") -> int:
    return sum(1 for w in writes(result, job) if w["fields"]["committed"])


def describe(result: TrialResult) -> str:
    lines = [f"{result.cell.id}: {result.verdict} reached={result.reached} {result.reason}"]
    lines += [f"  {v.invariant}: {v.message}" for v in result.violations]
    lines += [
        f"  {e['t']:8.3f} {e['source']:<16} {e['kind']:<13} {e['job']} {e['fields']}"
        for e in result.events
    ]
    return "\n".join(lines)
