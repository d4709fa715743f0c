"""Real worker processes, killed with SIGKILL at random moments and restarted, over a batch
of jobs against real providers, on both ledger stores: exactly one effect per job, and no
job lost."""

from __future__ import annotations

import random
import shutil
import signal
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

JOBS = 60
WORKERS = 3
KILLS = 10


@pytest.fixture(scope="module")
def providers() -> Iterator[dict[str, Any]]:
    d = Path(tempfile.mkdtemp(prefix="cp-prov-"))
    procs = {
        k: start_provider(k, state_path=d / f"{k}.db", name=k) for k in ("idempotent", "plain")
    }
    try:
        yield procs
    finally:
        for p in procs.values():
            p.close()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
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


def test_random_sigkills_lose_nothing_and_duplicate_nothing(
    target: ReferenceTarget, providers: dict[str, Any]
) -> None:
    rng = random.Random(20261130)
    prefix = f"k{rng.randrange(10**6)}-{target.state_dir.name[-6:]}"
    jobs = {f"{prefix}-{i:03d}": ("idempotent", "plain")[i % 2] for i in range(JOBS)}
    for job_id, kind in jobs.items():
        target.enqueue(job_id, kind, {"job_id": job_id, "amount": 7})
    specs = {k: (k, p.url) for k, p in providers.items()}
    settings = dict(lease_ttl_s=0.3, http_timeout_s=0.5, poll_s=0.005, backoff_s=0.01)
    kills = 0
    with Fleet(target, specs, settings=settings) as fleet:
        live = [fleet.start() for _ in range(WORKERS)]
        deadline = time.monotonic() + 30
        while not target.quiescent(target.read_ledger()):
            assert time.monotonic() < deadline, "jobs never reached an end state"
            time.sleep(rng.uniform(0.02, 0.15))
            if kills < KILLS:
                victim = live.pop(rng.randrange(len(live)))
                victim.signal(signal.SIGKILL)
                victim.popen.wait(5)
                kills += 1
                live.append(fleet.start())
    view = target.read_ledger()
    effects: Counter[str] = Counter()
    for p in providers.values():
        effects.update(e.job_id for e in p.client.effects() if e.job_id in jobs)
    assert {j.job_id for j in view.jobs} == set(jobs)
    not_done = [
        (j.job_id, j.delivery_state, j.needs_review)
        for j in view.jobs
        if j.delivery_state != "acknowledged"
    ]
    assert not_done == [], "every job ends acknowledged"
    assert [j for j in jobs if effects[j] != 1] == [], "exactly one effect per job"
    assert kills == KILLS or len(view.claims) >= JOBS, "the run ended before the kills were spent"
    tokens = Counter((c.job_id, c.token) for c in view.claims)
    assert max(tokens.values()) == 1, "a token was issued twice for one job"
