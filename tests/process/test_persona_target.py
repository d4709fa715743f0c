"""A worker that speaks Stripe's API, run by ``crashpoint`` against the Stripe persona.

The worker (``tests/process/workers/pystripe``) posts form-encoded PaymentIntents with
urllib, the job's id as its Idempotency-Key and ``metadata[job_id]``, and finds Stripe's
base URL in ``STRIPE_API_BASE`` (``[[providers]] env``), as a worker written for a
Stripe SDK would: nothing in it knows crashpoint's own variables.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from clikit import ROOT, leftovers, results, run

pytestmark = pytest.mark.process

WORKER = ROOT / "tests" / "process" / "workers" / "pystripe"


def test_a_stripe_worker_holds_and_the_results_name_the_persona(
    scratch: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = ["-c", str(WORKER / "crashpoint.toml"), "--scenario", "crash_after_external_success"]
    done = run([*args, "--signal", "SIGKILL", "--out", str(out), "--seed", "7"], scratch)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = results(out)
    assert doc["target"]["providers"] == [
        {"name": "billing", "kind": "idempotent", "persona": "stripe"}
    ]
    (trial,) = doc["trials"]
    assert (trial["verdict"], trial["provider"], trial["persona"]) == (
        "held",
        "idempotent",
        "stripe",
    )
    # The persona recorded the worker's writes as the kind's: the job's key, one effect.
    writes = [
        e["fields"]
        for e in trial["events"]
        if e["kind"] == "arrival" and e["fields"]["kind"] == "write"
    ]
    assert {(w["method"], w["path"]) for w in writes} == {("POST", "/v1/payment_intents")}
    assert {w["idempotency_key"] for w in writes} == {w["job_id"] for w in writes}
    commits = [e for e in trial["events"] if e["kind"] == "commit"]
    assert len(commits) == len({e["job"] for e in commits})
    assert leftovers(scratch) == []


def test_check_config_names_the_stripe_calls_and_an_unserved_path(
    scratch: Path, tmp_path: Path
) -> None:
    done = run(["-c", str(WORKER / "crashpoint.toml")], scratch, command="check-config")
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert "billing (stripe over idempotent)" in said
    assert "stripe: POST /v1/payment_intents (write)" in said
    assert "(or STRIPE_API_BASE)" in said
    # The same worker pointed at a path the persona does not serve: a 404 the provider
    # records nowhere, named from what check-config's tap saw.
    wrong = tmp_path / "wrong"
    shutil.copytree(WORKER, wrong)
    worker = wrong / "worker.py"
    worker.write_text(worker.read_text().replace('"/v1/payment_intents"', '"/v1/charges"'))
    done = run(
        ["-c", str(wrong / "crashpoint.toml"), "--timeout-s", "2"], scratch, command="check-config"
    )
    assert done.returncode == 2, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert "the worker called POST /v1/charges, which the stripe persona does not serve" in said
