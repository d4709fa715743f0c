"""Eight worker processes racing to claim 400 jobs, on both ledger stores: no job is
claimed twice, every job gets exactly one effect."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_providers import start_provider
from scenarios import ReferenceTarget
from scenarios.fleet import Fleet

pytestmark = pytest.mark.process

JOBS = 400
WORKERS = 8


@pytest.fixture(scope="module")
def provider() -> Iterator[Any]:
    d = Path(tempfile.mkdtemp(prefix="cp-prov-"))
    p = start_provider("idempotent", state_path=d / "p.db", name="billing")
    try:
        yield p
    finally:
        p.close()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ReferenceTarget]:
    if request.param == "sqlite":
        t = ReferenceTarget("sqlite:///ledger.db", state_dir=tmp_path)
    else:
        dsn = request.getfixturevalue("pg_dsn")
        t = ReferenceTarget(dsn, state_dir=tmp_path, schema=request.getfixturevalue("pg_schema"))
    t.setup()
    try:
        yield t
    finally:
        t.close()


def test_concurrent_claimers_never_share_a_job(target: ReferenceTarget, provider: Any) -> None:
    prefix = f"c-{target.state_dir.name[-8:]}"
    jobs = [f"{prefix}-{i:04d}" for i in range(JOBS)]
    for job_id in jobs:
        target.enqueue(job_id, "billing", {"job_id": job_id})
    settings = dict(lease_ttl_s=5.0, poll_s=0.005)
    with Fleet(target, {"billing": ("idempotent", provider.url)}, settings=settings) as fleet:
        for _ in range(WORKERS):
            fleet.start()
        deadline = time.monotonic() + 60
        while not target.quiescent(target.read_ledger()):
            assert time.monotonic() < deadline, "the batch never finished"
            time.sleep(0.05)
    view = target.read_ledger()
    per_job = Counter(c.job_id for c in view.claims)
    assert set(per_job) == set(jobs)
    assert max(per_job.values()) == 1, "a live lease was claimed a second time"
    assert {c.token for c in view.claims} == {1}
    assert len({c.worker_id for c in view.claims}) > 1, "only one worker ever won a claim"
    assert all(w.accepted for w in view.result_writes)
    effects = Counter(e.job_id for e in provider.client.effects() if e.job_id in per_job)
    assert all(effects[j] == 1 for j in jobs)
    assert {j.delivery_state for j in view.jobs} == {"acknowledged"}
