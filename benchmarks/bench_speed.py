"""The speed targets: a full matrix's wall time at several widths, the harness's own
time per trial by phase, the oracle on large histories, report rendering, peak memory.

``python -m benchmarks speed`` (``nox -s bench`` runs every benchmark) writes
``bench.json`` in the working directory and prints a table. Each matrix is a whole
``crashpoint demo`` command in a child process, timed from outside, so start-up, set-up
and report writing count; its peak memory and its CPU time per trial are that process's
own (the harness, not its workers or providers). ``BENCH_RUNS`` (default 1) repeats
each matrix; medians are reported.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_reports import synthetic
from benchmarks.stats import BENCH_JSON, repeat_s, write_bench
from fake_providers.models import Arrival, Effect
from harness.history import Event
from harness.observe import arrival_event, commit_event
from harness.oracle import JobFinal, TrialFacts, check
from harness.phases import PHASES
from harness.run_width import auto_jobs
from reports import write_html

WIDTHS: tuple[str, ...] = ("1", "2", "auto")
ARRIVALS = (10_000, 100_000)
REPORT_TRIALS = 10_000
OUT = BENCH_JSON


def run_matrix(jobs: str, out: Path) -> dict[str, Any]:
    """One ``crashpoint demo -j jobs``: wall seconds, peak memory, per-trial timings."""
    argv = [sys.executable, "-m", "harness", "demo", "-j", jobs, "--seed", "1", "--out", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Waited for but not reaped: the exited harness's /proc entry still tells its own CPU
    # time (every thread's) apart from its children's, the workers' and providers'.
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    wall = time.perf_counter() - t0
    own_cpu = own_cpu_s(proc.pid)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    doc = json.loads((out / "results.json").read_text())
    return {
        "wall_s": wall,
        "exit": proc.returncode,
        "peak_rss_mib": usage.ru_maxrss / 1024,
        "harness_cpu_s": own_cpu,
        "trials": doc["trials"],
        "summary": doc["summary"],
    }


def own_cpu_s(pid: int) -> float:
    """The CPU seconds process ``pid`` used itself, its children's not counted."""
    # The fields after the command's closing parenthesis; utime and stime are 14th and 15th.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def matrices(runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="cp-bench-") as tmp:
        for jobs in WIDTHS:
            samples = [run_matrix(jobs, Path(tmp) / f"j{jobs}-{i}") for i in range(runs)]
            n = len(samples[0]["trials"])
            walls = [s["wall_s"] for s in samples]
            out[jobs] = {
                "jobs": auto_jobs(n) if jobs == "auto" else int(jobs),
                "trials": n,
                "wall_s": statistics.median(walls),
                "wall_s_runs": walls,
                "trials_per_min": n / statistics.median(walls) * 60,
                "peak_rss_mib": statistics.median(s["peak_rss_mib"] for s in samples),
                "harness_cpu_ms_per_trial": statistics.median(
                    s["harness_cpu_s"] / n * 1000 for s in samples
                ),
                "summary": samples[-1]["summary"],
                "timings": [t["timings"] for s in samples for t in s["trials"]],
            }
    return out


def phases(timings: list[dict[str, float]]) -> dict[str, float]:
    """Median seconds per trial of the overhead and of each phase."""
    keys = ["overhead_s", "waits_s", *(f"{p}_s" for p in PHASES)]
    return {k: statistics.median(t.get(k, 0.0) for t in timings) for k in keys}


def history(n_arrivals: int) -> tuple[list[Event], TrialFacts]:
    """A history of ``n_arrivals`` jobs, each claimed, written once, committed, closed.

    Provider events are made the way a trial makes them (:mod:`harness.observe`), with
    the fields the report reads beside the record's own.
    """
    events: list[Event] = []
    jobs = []
    for i in range(1, n_arrivals + 1):
        job, t = f"j-{i:06d}", i * 1e-3
        jobs.append(job)
        events.append(Event(t, "worker:w1", "claim", job, 1, {"token": 1, "worker": "w1"}))
        key, fingerprint = f"effect-{job}", "f" * 64
        arrival = Arrival(
            id=i,
            t_mono=t + 1e-4,
            t_wall=t + 1e-4,
            provider="svc",
            kind="write",
            method="POST",
            path="/v1/effects",
            job_id=job,
            idempotency_key=key,
            client_marker=None,
            fingerprint=fingerprint,
            fencing_token="1",  # noqa: S106  (a lease token, no password)
            worker_id="w1",
            peer_pid=1,
            status=201,
            committed=True,
            replayed=False,
            effect_id=i,
            fault=None,
        )
        events.append(arrival_event(arrival))
        effect = Effect(
            id=i,
            provider="svc",
            job_id=job,
            idempotency_key=key,
            client_marker=None,
            fingerprint=fingerprint,
            arrival_id=i,
            t_mono=t + 2e-4,
            t_wall=t + 2e-4,
        )
        events.append(commit_event(effect))
        events.append(
            Event(
                t + 3e-4,
                "worker:w1",
                "result_write",
                job,
                1,
                {"token": 1, "worker": "w1", "accepted": True, "wrote": "succeeded"},
            )
        )
    states = [JobFinal(j, "acknowledged", "succeeded", "confirmed", False, 1) for j in jobs]
    facts = TrialFacts(
        jobs=jobs,
        provider_kinds={"svc": "idempotent"},
        job_states=states,
        max_attempts=3,
        job_providers=dict.fromkeys(jobs, "svc"),
    )
    return events, facts


def oracle(n_arrivals: int) -> float:
    events, facts = history(n_arrivals)
    violations = check(events, facts)
    if violations:
        raise AssertionError(f"the synthetic history is clean, yet: {violations[0]}")
    return statistics.median(repeat_s(lambda: check(events, facts), runs=5))


def report(n_trials: int) -> float:
    results = synthetic(n_trials)
    with tempfile.TemporaryDirectory(prefix="cp-bench-report-") as tmp:
        return statistics.median(repeat_s(lambda: write_html(results, Path(tmp) / "out"), runs=1))


def table(doc: dict[str, Any]) -> str:
    lines = ["| measure | value |", "|---|---|"]
    for jobs, m in doc["matrix"].items():
        lines.append(
            f"| full matrix -j {jobs} ({m['jobs']} at once, {m['trials']} trials) | "
            f"{m['wall_s']:.1f} s, {m['trials_per_min']:.0f} trials/min, "
            f"harness peak {m['peak_rss_mib']:.0f} MiB, "
            f"harness CPU {m['harness_cpu_ms_per_trial']:.0f} ms a trial |"
        )
    serial, default = doc["matrix"]["1"]["wall_s"], doc["matrix"]["auto"]["wall_s"]
    lines.append(f"| speed-up of the default over -j 1 | {serial / default:.1f}x |")
    for name, seconds in doc["phases"].items():
        wide = doc["phases_default"][name]
        lines.append(
            f"| median per trial: {name.removesuffix('_s')} (-j 1 / default) | "
            f"{seconds * 1000:.0f} ms / {wide * 1000:.0f} ms |"
        )
    for n, seconds in doc["oracle_s"].items():
        lines.append(f"| oracle, {int(n):,} arrivals | {seconds:.2f} s |")
    lines.append(f"| report rendering, {REPORT_TRIALS:,} trials | {doc['report_s']:.1f} s |")
    return "\n".join(lines)


def main() -> None:
    runs = int(os.environ.get("BENCH_RUNS", "1"))
    matrix = matrices(runs)
    doc: dict[str, Any] = {
        "runs": runs,
        "load_average": os.getloadavg(),
        "matrix": {j: {k: v for k, v in m.items() if k != "timings"} for j, m in matrix.items()},
        # Per trial at -j 1 (the harness's own cost) and at the default (what width and
        # a shared machine add to it).
        "phases": phases(matrix["1"]["timings"]),
        "phases_default": phases(matrix["auto"]["timings"]),
        "oracle_s": {str(n): oracle(n) for n in ARRIVALS},
        "report_s": report(REPORT_TRIALS),
    }
    # Merged: the detection benchmark's figures in the same file stay.
    write_bench(doc)
    print(table(doc))
    print(f"written: {OUT.resolve()}")
