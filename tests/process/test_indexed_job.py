"""A Kubernetes Indexed Job (docs/k8s/) played on one machine: one ``crashpoint run
--shard auto/N`` process per index with ``JOB_COMPLETION_INDEX`` set, as each pod runs
it. One index runs twice (a replaced pod), one is SIGKILLed mid-run and run again; the
merge equals the unsharded run, names the duplicates it dropped, and refuses a shard of
another matrix.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from clikit import ROOT, cli, leftovers, run

pytestmark = pytest.mark.process

SHARDS = 3
#: A subset whose 7 cells fall 2-3 to each of 3 shards, two of them violated.
ARGS = [
    *("--mutant", "fresh_key_per_attempt", "--signal", "SIGKILL", "--seed", "7"),
    *("--scenario", "crash_after_external_success", "--scenario", "duplicate_delivery"),
    *("--scenario", "state_store_restore"),
]
RUN_TIMEOUT_S = 60


def verdicts(out: Path) -> dict[str, str]:
    doc = json.loads((out / "results.json").read_text())
    return {t["id"]: t["verdict"] for t in doc["trials"]}


def pod(index: int, name: str, scratch: Path, *extra: str) -> subprocess.Popen[str]:
    """One pod of the Job: its index in the environment, its own output directory."""
    tmp = scratch / f"tmp-{index}-{name}"
    tmp.mkdir()
    env = {
        **os.environ,
        "JOB_COMPLETION_INDEX": str(index),
        "TMPDIR": str(tmp),
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    out = scratch / "results" / f"shard-{index}-{name}"
    with (scratch / f"pod-{index}-{name}.log").open("w") as log:
        return subprocess.Popen(
            [*cli(), "run", *ARGS, "--shard", f"auto/{SHARDS}", "--out", str(out), *extra],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )


def wait_for(predicate: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_an_indexed_job_merges_into_the_unsharded_run(scratch: Path) -> None:
    whole = scratch / "whole"
    done = run([*ARGS, "--out", str(whole)], scratch)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]

    # Index 2 runs its cells one at a time and is killed once its first trial is done.
    killed = pod(2, "a", scratch, "-j", "1")
    pods = [pod(0, "a", scratch), pod(1, "a", scratch)]
    log = scratch / "pod-2-a.log"
    wait_for(lambda: "[1/" in log.read_text(), RUN_TIMEOUT_S, "index 2's first trial")
    os.killpg(killed.pid, signal.SIGKILL)
    assert killed.wait(RUN_TIMEOUT_S) == -signal.SIGKILL
    assert not (scratch / "results" / "shard-2-a" / "results.json").exists()
    # Its workers die with it (the watchdog), and the index runs again in a new pod.
    wait_for(lambda: leftovers(scratch / "tmp-2-a") == [], 20, "the killed pod's workers")
    pods.append(pod(2, "b", scratch))
    codes = [p.wait(RUN_TIMEOUT_S) for p in pods]
    # Index 1 again: a replaced pod, after the first finished (same seed, same trials).
    codes.insert(2, pod(1, "b", scratch).wait(RUN_TIMEOUT_S))

    shard_dirs = sorted((scratch / "results").iterdir())
    assert [d.name for d in shard_dirs] == ["shard-0-a", "shard-1-a", "shard-1-b", "shard-2-b"]
    docs = [json.loads((d / "results.json").read_text()) for d in shard_dirs]
    # Each pod exits 1 when one of its cells was violated, else 0 (all held).
    assert codes == [int(any(t["verdict"] == "violated" for t in d["trials"])) for d in docs]
    assert 1 in codes
    assert len({d["matrix_hash"] for d in docs}) == 1
    assert all(t["matrix_hash"] == docs[0]["matrix_hash"] for d in docs for t in d["trials"])
    assert json.loads((whole / "results.json").read_text())["matrix_hash"] == docs[0]["matrix_hash"]

    merged = scratch / "merged"
    paths = [str(d / "results.json") for d in shard_dirs]
    done = run([*paths, "--out", str(merged)], scratch, command="report")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert verdicts(merged) == verdicts(whole)
    # One trial per cell: the replaced pod's copies are gone, not kept beside the first.
    merged_doc = json.loads((merged / "results.json").read_text())
    assert len(merged_doc["trials"]) == len(verdicts(whole))
    replaced = sorted(verdicts(scratch / "results" / "shard-1-b"))
    dropped = [line for line in done.stdout.splitlines() if "dropped the duplicate" in line]
    assert sorted(line.split()[5] for line in dropped) == replaced
    assert all(f"from run {docs[2]['run_id']}" in line for line in dropped)
    assert leftovers(scratch) == []

    # A shard of another matrix (another config) is refused in one line, exit 2.
    other = json.loads((shard_dirs[0] / "results.json").read_text())
    other["matrix_hash"] = "sha256:0000000000000000"
    for trial in other["trials"]:
        trial["matrix_hash"] = other["matrix_hash"]
    stray = scratch / "other.json"
    stray.write_text(json.dumps(other))
    done = run([paths[1], str(stray), "--out", str(scratch / "no")], scratch, command="report")
    assert done.returncode == 2
    assert "merge only results of one matrix" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
