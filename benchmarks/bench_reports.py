"""Report rendering: a synthetic 2,000-trial run with timelines, target < 5 s median.

``python -m benchmarks reports``. Prints the median render time of the multi-page HTML
report (and of every format via ``write_all``), the self-contained file, and the sizes.
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.stats import describe, repeat_s
from harness.contract.vocabulary import PROVIDER_KINDS, Verdict
from reports import write_all, write_html
from reports.model import Evidence, Results, Target, TimelineEvent, TrialRow, ViolationRow

TRIALS = 2_000
RUNS = 5
TARGET_S = 5.0
SCENARIOS = [
    ("crash_before_external_call", "before_external_call"),
    ("crash_during_external_call", "provider_hold"),
    ("crash_after_external_success", "after_external_call"),
    ("duplicate_delivery", "enqueue"),
    ("lease_expiry_slow_worker", "before_external_call"),
    ("state_store_restore", "after_local_write"),
    ("provider_error_before_commit", "provider_fail"),
    ("simultaneous_trigger", "enqueue"),
    ("ambiguous_timeout", "toxic:timeout"),
    ("reset_after_commit", "toxic:reset_peer"),
    ("provider_down_during_reconcile", "before_reconcile"),
    ("ledger_link_faults", "toxic:latency"),
    ("slow_lease_renewal", "toxic:latency"),
]
PROVIDERS = PROVIDER_KINDS
SIGNALS = ("SIGKILL", "SIGTERM", "SIGSTOP", None)
KINDS = ("claim", "failpoint", "arrival", "commit", "reconcile", "result_write", "ack", "note")
SOURCES = ("supervisor", "worker:w1", "worker:w2", "provider:idempotent", "ledger", "network")


def synthetic(n: int = TRIALS, *, seed: int = 1) -> Results:
    rng = random.Random(seed)
    trials = []
    for i in range(n):
        scenario, point = SCENARIOS[i % len(SCENARIOS)]
        provider = PROVIDERS[(i // len(SCENARIOS)) % len(PROVIDERS)]
        signal = SIGNALS[(i // (len(SCENARIOS) * len(PROVIDERS))) % len(SIGNALS)]
        verdict = rng.choices(list(Verdict), weights=(85, 6, 4, 5))[0]
        t = 0.0
        events = []
        for j in range(rng.randint(12, 30)):
            t += rng.expovariate(1 / 0.03)
            events.append(
                TimelineEvent(
                    index=j,
                    t=round(t, 6),
                    source=rng.choice(SOURCES),
                    kind=rng.choice(KINDS),
                    job="j-0001",
                    attempt=rng.choice((1, 2, None)),
                    fields={"outcome": rng.choice(("ok", "rejected", "error", "unknown"))},
                )
            )
        violations: tuple[ViolationRow, ...] = ()
        if verdict == Verdict.VIOLATED:
            row = {"id": 1, "job_id": "j-0001", "status": 201, "committed": True}
            violations = (
                ViolationRow(
                    invariant="no_duplicate_effect",
                    job="j-0001",
                    message="2 committed effects",
                    evidence=Evidence(arrivals=(row, row), effects=(row,), events=(1, 2)),
                ),
            )
        trials.append(
            TrialRow(
                id=f"{scenario}.{provider}.{signal or 'net'}.sqlite.process.r{i}",
                scenario=scenario,
                injection_point=point,
                provider=provider,
                signal=signal,
                backend="process",
                ledger="sqlite",
                mutant=None,
                verdict=verdict,
                reached=verdict != Verdict.SKIPPED and rng.random() > 0.03,
                reason="synthetic" if verdict != Verdict.HELD else None,
                duration_s=round(rng.uniform(0.2, 3.0), 3),
                replay=f"crashpoint run --scenario {scenario} --seed {i}",
                seed=i,
                events=tuple(events),
                violations=violations,
            )
        )
    return Results(
        run_id="bench",
        seed=seed,
        target=Target(name="reference", kind="reference"),
        trials=tuple(trials),
        environment={"python": "3.11"},
    )


def _cpu_s(fn: Callable[[], object]) -> float:
    """Process CPU seconds of one call: on a shared CI box wall time also measures the
    neighbours, CPU time measures only the renderer."""
    c0 = time.process_time()
    fn()
    return time.process_time() - c0


def _size(directory: Path) -> tuple[int, int]:
    files = [p for p in directory.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def main() -> None:
    results = synthetic()
    events = sum(len(t.events) for t in results.trials)
    print(f"reports: {len(results.trials)} trials, {events} events")
    with tempfile.TemporaryDirectory() as tmp:
        html_dir = Path(tmp) / "html"
        html = repeat_s(lambda: write_html(results, html_dir), runs=RUNS)
        print(f"  write_html (multi-page): {describe(html)}")
        cpu = [_cpu_s(lambda: write_html(results, html_dir)) for _ in range(RUNS)]
        print(f"  write_html (multi-page) CPU time: {describe(cpu)}")
        files, size = _size(html_dir)
        print(f"  output: {files} files, {size / 1e6:.1f} MB")
        single_dir = Path(tmp) / "single"
        single = repeat_s(lambda: write_html(results, single_dir, self_contained=True), runs=RUNS)
        print(f"  write_html (self-contained): {describe(single)}")
        print(f"  output: {(single_dir / 'index.html').stat().st_size / 1e6:.1f} MB in one file")
        every = repeat_s(lambda: write_all(results, Path(tmp) / "all"), runs=RUNS)
        print(f"  write_all (json, html, junit, markdown): {describe(every)}")
    med = statistics.median(html)
    verdict = "ok" if med < TARGET_S else "OVER TARGET"
    load = os.getloadavg()[0]
    print(
        f"  target: median multi-page render < {TARGET_S:.0f} s: {med:.2f} s ({verdict}; "
        f"CPU {statistics.median(cpu):.2f} s; load average {load:.1f} on {os.cpu_count()} CPUs)"
    )


if __name__ == "__main__":
    main()
