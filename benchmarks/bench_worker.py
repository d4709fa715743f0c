"""Reference worker throughput on each ledger store, and the cost of a disabled failpoint.

Throughput is measured from the ledger's own audit rows (first claim to last result
write), so worker start-up is not counted; each run uses a fresh ledger.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
import timeit
import uuid
from pathlib import Path

from benchmarks.stats import describe
from fake_providers import start_provider
from harness.probes import postgres_dsn
from scenarios import ReferenceTarget
from scenarios.fleet import Fleet

JOBS = 300
WORKERS = 4
RUNS = 3
PG_DSN = postgres_dsn()


def _run_once(target: ReferenceTarget, url: str) -> float:
    prefix = uuid.uuid4().hex[:6]
    for i in range(JOBS):
        job_id = f"b{prefix}-{i:04d}"
        target.enqueue(job_id, "billing", {"job_id": job_id, "amount": i})
    with Fleet(target, {"billing": ("idempotent", url)}, settings={"poll_s": 0.005}) as fleet:
        for _ in range(WORKERS):
            fleet.start()
        deadline = time.monotonic() + 120
        while not target.quiescent(target.read_ledger()):
            if time.monotonic() > deadline:
                raise RuntimeError("benchmark batch did not finish in 120 s")
            time.sleep(0.02)
    view = target.read_ledger()
    span = max(w.t_mono for w in view.result_writes) - min(c.t_mono for c in view.claims)
    return JOBS / span


def _pg_schema() -> tuple[str, object]:
    import psycopg

    name = f"bench_{uuid.uuid4().hex[:10]}"
    conn = psycopg.connect(PG_DSN, autocommit=True)
    conn.execute(f'CREATE SCHEMA "{name}"')
    return name, conn


def throughput(store: str, url: str) -> list[float]:
    rates = []
    for _ in range(RUNS):
        d = Path(tempfile.mkdtemp(prefix="cp-bench-"))
        conn = None
        try:
            if store == "sqlite":
                target = ReferenceTarget("sqlite:///ledger.db", state_dir=d)
            else:
                schema, conn = _pg_schema()
                target = ReferenceTarget(PG_DSN, state_dir=d, schema=schema)
            target.setup()
            rates.append(_run_once(target, url))
            target.close()
        finally:
            if conn is not None:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')  # type: ignore[attr-defined]
                conn.close()  # type: ignore[attr-defined]
            shutil.rmtree(d, ignore_errors=True)
    return rates


def failpoint_cost_ns() -> list[float]:
    """Median cost of ``failpoint()`` with CRASHPOINT_FAILPOINTS unset, in ns per call."""
    from harness import failpoints

    assert not failpoints.enabled(), "unset CRASHPOINT_FAILPOINTS to measure the no-op"
    n = 1_000_000
    timer = timeit.Timer("fp('after_claim', 'j-0001', 1)", globals={"fp": failpoints.failpoint})
    return [t / n * 1e9 for t in timer.repeat(repeat=7, number=n)]


def main() -> None:
    d = Path(tempfile.mkdtemp(prefix="cp-bench-prov-"))
    with start_provider("idempotent", state_path=d / "p.db", name="billing") as provider:
        for store in ("sqlite", "postgres"):
            try:
                rates = throughput(store, provider.url)
            except Exception as exc:  # PostgreSQL may be absent on a laptop
                print(f"worker throughput [{store}]: skipped ({exc})")
                continue
            print(
                f"worker throughput [{store}, {WORKERS} workers, {JOBS} jobs]: "
                f"median {statistics.median(rates):.1f} jobs/s "
                f"(runs: {', '.join(f'{r:.1f}' for r in rates)})"
            )
    shutil.rmtree(d, ignore_errors=True)
    print(f"failpoint() disabled: {describe(failpoint_cost_ns(), 'ns')}")


if __name__ == "__main__":
    main()
