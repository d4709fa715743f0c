"""Fake providers: start-to-ready time and write throughput (sequential and 8 clients)."""

from __future__ import annotations

import itertools
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from benchmarks.stats import describe, repeat_s
from fake_providers import ProviderProcess, start_provider
from fake_providers.seal import SECRET_HEADER

START_RUNS = 15
RUNS = 5
SEQUENTIAL_POSTS = 400
CLIENTS = 8
POSTS_PER_CLIENT = 100

_jobs = itertools.count()


def _post(c: httpx.Client, kind: str) -> None:
    job = f"j-{next(_jobs):07d}"
    if kind == "idempotent":
        r = c.post("/v1/effects", json={"job_id": job}, headers={"Idempotency-Key": job})
    else:
        r = c.post("/v1/sends", json={"job_id": job, "client_marker": f"m-{job}"})
    if r.status_code != 201:
        raise RuntimeError(f"benchmark write answered {r.status_code}: {r.text}")


def _sequential_rps(p: ProviderProcess) -> float:
    with httpx.Client(base_url=p.url) as c:
        t0 = time.perf_counter()
        for _ in range(SEQUENTIAL_POSTS):
            _post(c, p.kind)
        return SEQUENTIAL_POSTS / (time.perf_counter() - t0)


def _concurrent_rps(p: ProviderProcess) -> float:
    clients = [httpx.Client(base_url=p.url) for _ in range(CLIENTS)]
    try:
        for c in clients:  # connect first, so the timing covers requests only
            c.get("/_control/health", headers={SECRET_HEADER: p.secret})
        barrier = threading.Barrier(CLIENTS + 1)

        def run(c: httpx.Client) -> None:
            barrier.wait()
            for _ in range(POSTS_PER_CLIENT):
                _post(c, p.kind)

        threads = [threading.Thread(target=run, args=(c,)) for c in clients]
        for t in threads:
            t.start()
        barrier.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        return CLIENTS * POSTS_PER_CLIENT / (time.perf_counter() - t0)
    finally:
        for c in clients:
            c.close()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-providers-") as tmp:
        root = Path(tmp)
        n = itertools.count()

        def start_stop() -> None:
            p = start_provider("idempotent", state_path=root / f"start-{next(n)}.db")
            p.close()

        # Start includes stop here; measure start alone for the headline number.
        starts: list[float] = []
        for i in range(START_RUNS):
            t0 = time.perf_counter()
            p = start_provider("idempotent", state_path=root / f"ready-{i}.db")
            starts.append(time.perf_counter() - t0)
            p.close()
        print(f"start-to-ready (idempotent): {describe([s * 1000 for s in starts], 'ms')}")
        cycles = repeat_s(start_stop, runs=5)
        print(f"start+stop cycle: {describe([s * 1000 for s in cycles], 'ms')}")

        for kind in ("idempotent", "plain"):
            with start_provider(kind, state_path=root / f"{kind}.db") as p:
                seq = [_sequential_rps(p) for _ in range(RUNS)]
                conc = [_concurrent_rps(p) for _ in range(RUNS)]
            print(f"{kind} sequential POSTs: {describe(seq, 'req/s')}")
            print(f"{kind} {CLIENTS} concurrent clients: {describe(conc, 'req/s')}")
            ratio = statistics.median(conc) / statistics.median(seq)
            print(f"{kind} concurrency gain: x{ratio:.2f}")


if __name__ == "__main__":
    main()
