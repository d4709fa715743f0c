"""Infrastructure costs: Toxiproxy start and proxy overhead, worker start per backend,
failpoint round trip. ``python -m benchmarks infra``."""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks.stats import describe, repeat_s
from harness.backends.process import ProcessBackend
from harness.contract.errors import CrashpointError
from harness.network import NetworkFaults, ToxiproxyServer, find_toxiproxy
from harness.rendezvous import Rendezvous

RUNS = 15
REQUESTS = 300
FAILPOINT_CALLS = 2000


@contextmanager
def echo_server() -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        listener.close()


def request(port: int) -> None:
    """One request on a fresh connection, as an HTTP/1.0 client would make it."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"ping")
        sock.recv(16)


def bench_toxiproxy() -> None:
    try:
        location = find_toxiproxy()
    except CrashpointError as exc:
        print(f"toxiproxy: skipped ({exc})")
        return
    servers: list[ToxiproxyServer] = []

    def start() -> None:
        servers.append(ToxiproxyServer(location).start())

    try:
        print("toxiproxy start-to-ready:", describe(repeat_s(start, runs=RUNS), "s"))
    finally:
        for server in servers:
            server.stop()
    with echo_server() as port, ToxiproxyServer(location) as server, NetworkFaults(server) as nf:
        proxy = nf.proxy("bench", f"127.0.0.1:{port}")
        direct = repeat_s(lambda: request(port), runs=REQUESTS)
        proxied = repeat_s(lambda: request(proxy.port), runs=REQUESTS)
    us = [s * 1e6 for s in direct]
    print("request direct:       ", describe(us, "µs"))
    print("request via proxy:    ", describe([s * 1e6 for s in proxied], "µs"))
    ratio = statistics.median(proxied) / statistics.median(direct)
    print(f"proxy overhead: {ratio:.2f}x direct (no toxics)")


def bench_workers() -> None:
    argv = [sys.executable, "-c", "pass"]
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="cp-bench-") as d:
        with ProcessBackend() as backend:
            process = repeat_s(lambda: backend.start("p", argv, env=env, cwd=d).wait(30), runs=RUNS)
        print("process worker start-to-exit:", describe(process, "s"))
        try:
            from harness.backends.docker import DockerBackend, connect

            client = connect()
        except CrashpointError as exc:
            print(f"docker: skipped ({exc})")
            return
        with DockerBackend(client=client) as docker_backend:
            docker_backend.start("warm", argv, env=env, cwd=d).wait(60)  # image import once
            docker = repeat_s(
                lambda: docker_backend.start("d", argv, env=env, cwd=d).wait(30), runs=RUNS
            )
        print("docker worker start-to-exit: ", describe(docker, "s"))
        print(f"docker / process: {statistics.median(docker) / statistics.median(process):.1f}x")


# Times each failpoint() call from inside a real worker process.
_CLIENT = f"""
import json, time
from harness.contract.failpoint import failpoint
samples = []
for i in range({FAILPOINT_CALLS}):
    t0 = time.perf_counter()
    failpoint("after_claim", "j-0001", 1)
    samples.append(time.perf_counter() - t0)
print(json.dumps(samples))
"""


def bench_rendezvous() -> None:
    with (
        tempfile.TemporaryDirectory(prefix="cp-bench-") as d,
        Rendezvous(Path(d) / "fp.sock") as rv,
    ):
        out = subprocess.run(
            [sys.executable, "-c", _CLIENT],
            env={**os.environ, **rv.env},
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
    samples = [s * 1e6 for s in json.loads(out)[1:]]  # the first call also connects
    print("failpoint round trip (unarmed):", describe(samples, "µs"))


def main() -> None:
    bench_toxiproxy()
    bench_workers()
    bench_rendezvous()


if __name__ == "__main__":
    main()
