"""The sealed oracle: a worker cannot read or rewrite a provider's ground truth.

A real provider holds a real request under an armed fault, and a "worker" subprocess,
started the way the harness starts one (this process's environment plus ``env()``),
tries the control and oracle APIs with no secret, a made-up one, and every string it
can read in its environment and in the environment and argv of every process it can
see. Each attempt must get a 403, change nothing, and show up in the arrivals the
harness reads, with the worker's id and pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fake_providers import Fault, ProviderProcess, start_provider

pytestmark = pytest.mark.process

#: The worker under test, as hostile as a worker can be without ptrace.
WORKER = r"""
import json, os, re, secrets, sys
import httpx

url = os.environ["CRASHPOINT_PROVIDER_BILLING_URL"]
seen = [f"{k}={v}" for k, v in os.environ.items()]
for pid in filter(str.isdigit, os.listdir("/proc")):
    for name in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                seen.append(f.read().decode(errors="replace"))
        except OSError:
            pass
words = set()
for text in seen:
    words.update(w for w in re.split(r"[\s\x00=:,;\"']+", text) if 16 <= len(w) <= 256)
# The secret is urlsafe base64; try those shapes first, then anything else, capped.
shaped = sorted(w for w in words if re.fullmatch(r"[A-Za-z0-9_-]{20,}", w))
guesses = (shaped + sorted(words - set(shaped)))[:300]

calls = [
    ("POST", "/_control/faults", {"action": "fail_before_commit", "times": 99}),
    ("GET", "/_oracle/arrivals", None),
    ("POST", "/_control/reset", None),
    ("POST", "/_control/wipe", None),
    ("DELETE", "/_control/faults", None),
    ("GET", "/_oracle/effects", None),
]
tries = [("none", {})] + [("made_up", {"X-Crashpoint-Secret": secrets.token_urlsafe(32)})]
tries += [("bearer", {"Authorization": f"Bearer {g}"}) for g in guesses[:20]]
tries += [("read", {"X-Crashpoint-Secret": g}) for g in guesses]
attempts = []
with httpx.Client(base_url=url, headers={"X-Worker-Id": "w-evil"}, timeout=10) as http:
    for i, (how, headers) in enumerate(tries):
        # Every call with the first guesses, then one call per further guess.
        for method, path, body in calls if i < 3 else calls[i % len(calls) : i % len(calls) + 1]:
            r = http.request(method, path, json=body, headers=headers)
            attempts.append({"how": how, "method": method, "path": path, "status": r.status_code,
                             "type": r.headers.get("content-type")})
json.dump({"pid": os.getpid(), "attempts": attempts, "words": sorted(words)}, sys.stdout)
"""

#: ``python -m fake_providers`` is ``crashpoint provider serve`` without the harness.
SERVE = (sys.executable, "-m", "fake_providers")

# Module-wide, so no kept-alive sockets: the providers it talks to are killed and gone
# long before the module's end, and a pooled socket would be left to the collector.
HTTP = httpx.Client(
    timeout=30.0,
    verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT),
    limits=httpx.Limits(max_keepalive_connections=0),
)


@pytest.fixture(scope="module", autouse=True)
def _close_http() -> Iterator[None]:
    yield
    HTTP.close()


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[ProviderProcess]:
    p = start_provider("idempotent", state_path=tmp_path / "billing.db", name="billing")
    yield p
    p.close()


def _worker(p: ProviderProcess, tmp_path: Path) -> dict[str, object]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    run = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, **p.env()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result: dict[str, object] = json.loads(run.stdout)
    return result


def test_a_worker_cannot_reach_the_ground_truth(provider: ProviderProcess, tmp_path: Path) -> None:
    p = provider
    # Ground truth worth stealing: one effect, and one request held after its commit.
    assert (
        HTTP.post(
            f"{p.url}/v1/effects", json={"job_id": "j-0"}, headers={"Idempotency-Key": "k-0"}
        ).status_code
        == 201
    )
    fault_id = p.client.arm(Fault("hold_after_commit", job="j-1"))
    answers: list[httpx.Response] = []
    held_write = threading.Thread(
        target=lambda: answers.append(
            HTTP.post(
                f"{p.url}/v1/effects", json={"job_id": "j-1"}, headers={"Idempotency-Key": "k-1"}
            )
        )
    )
    held_write.start()
    held = p.client.wait_held(fault_id, timeout_s=10)
    faults_before, effects_before = p.client.faults(), p.client.effects()
    last_before = p.client.arrivals()[-1].id

    result = _worker(p, tmp_path)

    attempts = result["attempts"]
    assert isinstance(attempts, list)
    assert len(attempts) >= 15, attempts  # it really tried, with and without guesses
    assert {a["how"] for a in attempts} >= {"none", "made_up", "read"}
    assert [a for a in attempts if a["status"] != 403] == []
    assert {a["type"] for a in attempts} == {"application/problem+json"}
    # The secret is nowhere a worker can read, which is why no guess could work.
    assert p.secret not in result["words"]  # type: ignore[operator]
    assert all(p.secret not in v for v in os.environ.values())

    # Nothing changed: the fault is armed, the request still held, the effects the same.
    assert p.client.faults() == faults_before
    assert p.client.effects() == effects_before
    assert p.client.release(fault_id, "respond") == 1
    held_write.join(10)
    assert [r.status_code for r in answers] == [201]

    # Every attempt is in the ground truth the harness reads, as the worker's.
    denied = [a for a in p.client.arrivals(after=last_before) if a.kind == "control_denied"]
    assert [(a.method, a.path) for a in denied] == [(a["method"], a["path"]) for a in attempts]
    assert {(a.worker_id, a.peer_pid, a.status, a.committed) for a in denied} == {
        ("w-evil", result["pid"], 403, False)
    }
    assert all(a.job_id is None and a.effect_id is None for a in denied)
    # The held request's arrival is untouched by all of it.
    [write] = [a for a in p.client.arrivals() if a.id == held.arrival_id]
    assert (write.committed, write.status) == (True, 201)


def test_a_restart_keeps_the_seal_and_the_harness_key(provider: ProviderProcess) -> None:
    provider.restart()
    assert provider.client.health()["name"] == "billing"
    assert HTTP.get(f"{provider.url}/_control/health").status_code == 403
    assert [a.kind for a in provider.client.arrivals()] == ["control_denied"]


def test_the_business_api_needs_no_secret(provider: ProviderProcess) -> None:
    r = HTTP.post(
        f"{provider.url}/v1/effects", json={"job_id": "j-1"}, headers={"Idempotency-Key": "k"}
    )
    assert r.status_code == 201
    lookup = HTTP.get(f"{provider.url}/v1/effects", params={"idempotency_key": "k"})
    assert lookup.status_code == 200


@contextlib.contextmanager
def _serve(tmp_path: Path, *flags: str, stdin: str | None = None) -> Iterator[dict[str, str]]:
    """Run ``crashpoint provider serve`` by hand, as a person would; yield its ready line."""
    cmd = [sys.executable, "-c", "from harness.cli import main; main()", "provider", "serve"]
    cmd += ["--kind", "plain", "--state", str(tmp_path / "s.db"), *flags]
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdin is not None
        assert proc.stdout is not None
        if stdin is not None:
            proc.stdin.write(stdin)
            proc.stdin.flush()
        line = proc.stdout.readline()
        assert line, proc.communicate(timeout=10)[1]
        yield json.loads(line)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=10)


def _health(url: str, secret: str | None = None) -> int:
    headers = {} if secret is None else {"X-Crashpoint-Secret": secret}
    return HTTP.get(f"{url}/_control/health", headers=headers).status_code


def test_serve_by_hand_makes_a_secret_and_prints_it(tmp_path: Path) -> None:
    with _serve(tmp_path) as ready:
        assert len(ready["secret"]) >= 40
        assert _health(ready["url"]) == 403
        assert _health(ready["url"], "guess") == 403
        assert _health(ready["url"], ready["secret"]) == 200


def test_serve_reads_a_given_secret_from_stdin_and_does_not_print_it(tmp_path: Path) -> None:
    with _serve(tmp_path, "--secret-stdin", stdin="s3cret-from-a-pipe\n") as ready:
        assert "secret" not in ready
        assert _health(ready["url"]) == 403
        assert _health(ready["url"], "s3cret-from-a-pipe") == 200


def test_serve_no_secret_leaves_control_open(tmp_path: Path) -> None:
    with _serve(tmp_path, "--no-secret") as ready:
        assert "secret" not in ready
        assert _health(ready["url"]) == 200


def test_serve_secret_stdin_without_a_line_is_one_clean_error(tmp_path: Path) -> None:
    run = subprocess.run(
        [*SERVE, "--kind", "plain", "--secret-stdin", "--state", str(tmp_path / "s.db")],
        input="",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert run.returncode == 1
    assert "--secret-stdin: stdin closed before a secret line arrived" in run.stderr
    assert "Traceback" not in run.stderr
