"""``crashpoint run --keep-state``: the state of every trial that did not hold is kept
under OUT/state and named in its result; a held trial's state goes with it."""

from __future__ import annotations

from pathlib import Path

import pytest
from clikit import leftovers, results, run

pytestmark = pytest.mark.process

CELL = [
    "--scenario",
    "crash_after_external_success",
    "--point",
    "after_external_call",
    "--signal",
    "SIGKILL",
    "--provider",
    "idempotent",
    "--seed",
    "5",
]


def test_a_violated_trial_keeps_its_state_and_a_held_one_does_not(scratch: Path) -> None:
    out = scratch / "out"
    done = run(
        [*CELL, "--mutant", "fresh_key_per_attempt", "--keep-state", "--out", str(out)], scratch
    )
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    (trial,) = results(out)["trials"]
    assert trial["verdict"] == "violated"
    kept = Path(trial["state_dir"])
    assert kept.parent == (out / "state").resolve()
    assert kept.name == f"{trial['id']}.seed-{trial['seed']}"
    # The worker's own records as the trial left them: the reference worker's ledger and
    # each worker's output; never the failpoint socket.
    names = {p.name for p in kept.rglob("*")}
    assert {"ledger.db", "w1.stderr.log", "w2.stderr.log"} <= names, sorted(names)
    assert not [p for p in kept.rglob("*") if p.is_socket()]
    # The trial's own temporary directory is gone all the same.
    assert not [p for p in scratch.iterdir() if p.name.startswith("cp-")]

    held_out = scratch / "held"
    done = run([*CELL, "--keep-state", "--out", str(held_out)], scratch)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (held,) = results(held_out)["trials"]
    assert (held["verdict"], held["state_dir"]) == ("held", None)
    assert not (held_out / "state").exists()
    assert leftovers(scratch) == []
