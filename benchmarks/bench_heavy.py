"""The heavy target: a worker, an enqueue and a status command that each spend 0.5 s of
CPU starting (a framework's import, stood in for by a busy loop: benchmarks/heavy/),
against the same target without that cost, each one's matrix at the default width.

Four forms of the test suite's pyqueue worker (tests/process/workers/pyqueue), its
billing provider's cells, run in alternation so the machine's load falls on all alike:

- ``light``: pyqueue as it is, one-shot commands;
- ``heavy one-shot``: every process (worker, each enqueue, each status poll) pays 0.5 s;
- ``heavy served``: the same start-up cost, but enqueue and status are served
  (``[target.serve]``, once per trial) and the worker announces each job's end
  (``job_end``), so quiescence needs no status polls;
- ``heavy served per run``: the same, with enqueue and status served once per run
  (``scope = "run"``): only the workers pay the start-up in every trial;
- ``heavy preloaded``: served per run, and the start-up is an import the run makes once
  (``[target.preload]``, the harness started with ``benchmarks/heavy`` on ``PYTHONPATH``
  so that its zygote finds the module): each worker is forked with it already paid.

Goal: heavy served per run at most 2x light's median matrix time, and no cell
inconclusive for time. The preloaded form can beat light itself, which polls its status
through one-shot commands; it prints how many of its workers were forked (a clock cell's
start cold, libfaketime being loaded as a process starts). ``HEAVY_RUNS`` (default 3)
repeats each matrix; medians are reported. ``HEAVY_FORMS`` (comma-separated) runs only
the forms it names; light always runs.
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

from benchmarks.stats import write_bench

ROOT = Path(__file__).resolve().parents[1]
PYQUEUE = ROOT / "tests" / "process" / "workers" / "pyqueue"
HEAVY = ROOT / "benchmarks" / "heavy"
GOAL = 2.0
#: The form whose start-up is preloaded: its run needs benchmarks/heavy on PYTHONPATH.
PRELOADED = "heavy preloaded"
PROVIDERS = '[[providers]]\nname = "billing"\nkind = "idempotent"\n\n'
PROVIDERS += '[[providers]]\nname = "mailer"\nkind = "plain"\n'


def argv(script: Path, *args: str, heavy: bool) -> str:
    """A TOML argv running ``script``, after the start-up cost when ``heavy``."""
    words = ["python3", *([str(HEAVY / "start.py")] if heavy else [])]
    return json.dumps([*words, str(script), *args])


def config(form: str) -> str:
    heavy = form != "light"
    served = form not in ("light", "heavy one-shot")
    worker_args = ["--job-end"] if served else []
    lines = [
        "[target]",
        f'name = "pyqueue-{form.replace(" ", "-")}"',
        f"command = {argv(PYQUEUE / 'worker.py', *worker_args, heavy=heavy)}",
        "workers = 2",
        "lease_ttl_s = 0.6",
        f"enqueue = {argv(PYQUEUE / 'enqueue.py', '{job_id}', '{payload_file}', heavy=heavy)}",
        f"status = {argv(PYQUEUE / 'status.py', '{job_id}', heavy=heavy)}",
        "max_attempts = 6",
        "min_backoff_s = 0.02",
    ]
    if served:
        serve = argv(HEAVY / "serve.py", heavy=True)
        lines += ["", "[target.serve]", f"enqueue = {serve}", f"status = {serve}"]
        if form != "heavy served":
            lines.append('scope = "run"')
    if form == PRELOADED:
        lines += ["", "[target.preload]", 'modules = ["heavyframework"]']
    return "\n".join(lines) + "\n\n" + PROVIDERS


def run_matrix(path: Path, out: Path, seed: int, *, preload: bool) -> dict[str, Any]:
    """One ``crashpoint run`` at the default width, timed from outside."""
    cmd = [sys.executable, "-m", "harness", "run", "-c", str(path), "--provider", "billing"]
    cmd += ["--seed", str(seed), "--out", str(out)]
    env = dict(os.environ)
    if preload:
        # The zygote imports heavyframework with the harness's own environment, and a
        # worker whose PYTHONPATH differed from it would start cold: set it for the run.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HEAVY), env.get("PYTHONPATH")]))
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env)
    wall = time.perf_counter() - t0
    trials = json.loads((out / "results.json").read_text())["trials"]
    starts = [e for t in trials for e in t.get("events", ()) if e.get("kind") == "worker_start"]
    verdicts = [t["verdict"] for t in trials]
    timed_out = [t["id"] for t in trials if t["verdict"] == "inconclusive" and _for_time(t)]
    return {
        "wall_s": wall,
        "trials": len(trials),
        "held": verdicts.count("held"),
        "inconclusive": verdicts.count("inconclusive"),
        "for_time": timed_out,
        "inconclusive_reasons": {
            t["id"]: t.get("reason") for t in trials if t["verdict"] == "inconclusive"
        },
        # A preloaded form whose workers started cold would measure nothing new: say so.
        "preloaded_starts": sum(e["fields"].get("start") == "preloaded" for e in starts),
        "worker_starts": len(starts),
    }


def _for_time(trial: dict[str, Any]) -> bool:
    reason = str(trial.get("reason") or "")
    return any(w in reason for w in ("within", "ran past", "time", "gave no"))


def main() -> None:
    runs = int(os.environ.get("HEAVY_RUNS", "3"))
    forms: tuple[str, ...] = (
        "light",
        "heavy one-shot",
        "heavy served",
        "heavy served per run",
        PRELOADED,
    )
    if os.environ.get("HEAVY_FORMS"):
        wanted = {f.strip() for f in os.environ["HEAVY_FORMS"].split(",")}
        forms = tuple(f for f in forms if f == "light" or f in wanted)
    samples: dict[str, list[dict[str, Any]]] = {f: [] for f in forms}
    with tempfile.TemporaryDirectory(prefix="cp-heavy-") as tmp:
        for form in forms:
            (Path(tmp) / f"{form}.toml").write_text(config(form))
        for i in range(runs):
            for form in forms:
                out = Path(tmp) / f"{form}-{i}"
                toml = Path(tmp) / f"{form}.toml"
                sample = run_matrix(toml, out, seed=i + 1, preload=form == PRELOADED)
                samples[form].append(sample)
                print(
                    f"  run {i + 1}/{runs} {form}: {sample['wall_s']:.1f} s, "
                    f"{sample['held']}/{sample['trials']} held, "
                    f"{len(sample['for_time'])} inconclusive for time"
                    + (
                        f", {sample['preloaded_starts']}/{sample['worker_starts']} workers forked"
                        if form == PRELOADED
                        else ""
                    ),
                    flush=True,
                )
    medians = {f: statistics.median(s["wall_s"] for s in samples[f]) for f in forms}
    for form in forms:
        print(f"{form}: median matrix {medians[form]:.1f} s over {runs} runs")
    for form in forms[1:]:
        ratio = medians[form] / medians["light"]
        goal = f" (goal <= {GOAL}x)" if form.endswith("per run") else ""
        print(f"{form} / light: {ratio:.2f}x{goal}")
    load = os.getloadavg()[0]
    print(f"load average at the end: {load:.1f} on {os.cpu_count()} CPUs (a shared machine)")
    write_bench({"heavy_target": {"runs": runs, "median_wall_s": medians, "samples": samples}})
