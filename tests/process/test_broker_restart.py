"""broker_restart: a durable Redis per trial, stopped and started again on the same data
and port. What it acknowledged survives SIGKILL; the RQ example's correct variant holds
the row (its worker, which quits when RQ's acknowledgement fails, is started again as a
supervisor would) and the BullMQ example's too. The RQ variant that reruns a job whose
acknowledgement failed is caught in tests/process/test_examples_matrix.py (BUGGY)."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest
from clikit import leftovers, results, run
from test_examples_standalone import BULLMQ, RQ, Example, require

from harness.brokers import RedisBroker, ping, redis_program

pytestmark = pytest.mark.process


def command(port: int, *words: str) -> bytes:
    """One Redis command in RESP, and its reply's first line."""
    request = f"*{len(words)}\r\n".encode() + b"".join(
        f"${len(w.encode())}\r\n{w}\r\n".encode() for w in words
    )
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request)
        return s.recv(1024)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=lambda s: s.name)
def test_what_the_broker_acknowledged_survives_its_restart(
    sig: signal.Signals, tmp_path: Path
) -> None:
    if redis_program() is None:
        pytest.skip("redis-server is not installed (scripts/install-infra.sh redis)")
    broker = RedisBroker(tmp_path / "broker")
    broker.start()
    try:
        port, first = broker.port, broker.pid
        assert command(port, "RPUSH", "queue", "j-0001") == b":1\r\n"
        broker.stop(sig)
        assert not ping(port)
        broker.start_again()
        assert (broker.port, broker.starts) == (port, 2)
        assert broker.pid != first
        assert command(port, "LRANGE", "queue", "0", "-1").endswith(b"j-0001\r\n")
    finally:
        broker.close()
    assert not ping(port)


@pytest.mark.parametrize("example", [RQ, BULLMQ], ids=lambda e: e.name)
def test_the_correct_examples_hold_a_broker_restarted_in_flight(
    example: Example, scratch: Path, request: pytest.FixtureRequest
) -> None:
    require(request.config, example)
    out = scratch / "out"
    config = f"examples/{example.name}/crashpoint.toml"
    args = ["-c", config, "--scenario", "broker_restart", "--point", "attempt_in_flight"]
    done = run([*args, "--provider", "mailer", "-j", "2", "--out", str(out)], scratch)
    trials = results(out)["trials"]
    assert len(trials) == 2  # SIGKILL and SIGTERM to the broker
    not_held = [(t["id"], t["verdict"], t.get("reason")) for t in trials if t["verdict"] != "held"]
    assert not not_held, not_held
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for t in trials:
        said = [e["fields"].get("text", "") for e in t["events"]]
        assert any(
            s.startswith("SIGKILL to the broker") or s.startswith("SIGTERM to the broker")
            for s in said
        )
        assert any("the broker is back on port" in s for s in said)
        if example is RQ:
            # RQ quits when it cannot acknowledge the job; the harness starts it again.
            assert any("started again, as a supervisor would" in s for s in said), said
    assert leftovers(scratch) == []


OWN = Path(__file__).parent / "workers" / "ownbroker" / "redis-broker.sh"


def own_broker_config(scratch: Path, variant: str) -> Path:
    """The RQ example's ``variant`` with ``[target.broker]`` start and stop commands of
    its own (tests/process/workers/ownbroker/redis-broker.sh) instead of a kind."""
    here = Path(__file__).parents[2] / "examples" / RQ.name
    text = (here / variant).read_text()
    for name in ("worker.py", "enqueue.py", "status.py"):
        text = text.replace(f'"{name}"', f'"{here / name}"')
    own = (
        "[target.broker]\n"
        f'start = ["sh", "{OWN}", "start", "{{port}}", "{{data_dir}}"]\n'
        f'stop = ["sh", "{OWN}", "stop", "{{port}}", "{{data_dir}}", "{{signal}}"]\n'
        'url = "redis://127.0.0.1:{port}/0"\n'
        'env = "REDIS_URL"\n\n'
    )
    start = text.index("\n[target.broker]") + 1
    text = text[:start] + own + text[text.index("[[providers]]") :]
    path = scratch / "crashpoint.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("variant", "verdict"),
    [("crashpoint.toml", "held"), ("crashpoint-buggy-rerun-on-ack-error.toml", "violated")],
    ids=["correct", "rerun-on-ack-error"],
)
def test_a_broker_of_the_targets_own_is_restarted_by_its_commands(
    variant: str, verdict: str, scratch: Path, request: pytest.FixtureRequest
) -> None:
    require(request.config, RQ)
    out = scratch / "out"
    args = ["-c", str(own_broker_config(scratch, variant)), "--scenario", "broker_restart"]
    args += ["--point", "attempt_in_flight", "--provider", "mailer", "--signal", "SIGKILL"]
    done = run([*args, "--out", str(out)], scratch)
    assert (out / "results.json").is_file(), done.stdout[-2000:] + done.stderr[-2000:]
    [trial] = results(out)["trials"]
    assert trial["verdict"] == verdict, (trial.get("reason"), done.stdout[-2000:])
    said = [e["fields"].get("text", "") for e in trial["events"]]
    assert "SIGKILL to the broker (command on port" in " ".join(said)
    if verdict == "violated":
        assert "no_duplicate_effect" in {v["invariant"] for v in trial["violations"]}
    assert leftovers(scratch) == []
