"""The example workers, each run by hand the way the matrix runs it, without the matrix.

For each example the test reads its ``crashpoint.toml`` (or a buggy variant beside it),
starts one fake provider per ``[[providers]]`` entry, writes the harness's payload file,
runs the ``enqueue`` command, starts workers with the command target's environment,
kills one at a failpoint or while a provider holds its request, restarts, and asks the
``status`` command how the job ended. The provider's effect log is the ground truth: a
correct variant leaves exactly one effect per provider per job; each buggy variant shows
its bug (a second effect, a job done with no receipt, more writes than declared).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
import rediskit

from fake_providers import Fault, ProviderProcess, start_provider
from harness.contract.env import provider_env_name
from harness.pytest_plugin import missing
from harness.rendezvous import Rendezvous

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
HTTP_TIMEOUT_S = 2.0
DONE_TIMEOUT_S = 30.0
FINAL = ("done", "needs_review", "dead_lettered")


@dataclass(frozen=True)
class Example:
    """What a test needs to know about one example beyond its crashpoint.toml."""

    name: str
    #: Every job calls each declared provider (True) or only the one it names (False).
    calls_every_provider: bool
    #: A worker blocked at a failpoint keeps its lease (renewed in the background).
    renews_while_blocked: bool
    needs: tuple[str, ...]


RQ = Example("rq-worker", True, True, needs=("redis", "rq"))
NODE = Example("node-worker", False, False, needs=("node",))
BULLMQ = Example("bullmq-worker", True, True, needs=("redis", "node", "bullmq"))
#: Not in ALL (its providers are MCP tool servers, which this file's hand-run HTTP trials
#: do not start); test_examples_matrix runs it, and test_providers_mcp its servers.
MCP = Example("mcp-agent", True, True, needs=("mcp",))
ALL = [pytest.param(e, id=e.name) for e in (RQ, NODE, BULLMQ)]
#: The examples on the vendors' own SDKs (personas, not the kinds' HTTP routes): not in
#: ALL either, since this file's hand-run trials speak the kinds; test_examples_matrix
#: runs them, and test_sdk_* the SDKs against each persona.
AGENT_SDK = Example("agent-sdk", True, True, needs=("sdks",))
NODE_SDK = Example("node-sdk-worker", False, False, needs=("node", "npm"))
#: Plain SMTP through nodemailer, to an smtp provider (not in ALL: it speaks SMTP).
SMTP_NODE = Example("smtp-node-worker", False, False, needs=("node", "npm"))
#: An in-house orders API declared by its routes (kind = "http"); not in ALL: its wire is
#: the declared one, not the kinds' (test_declared_http runs it).
INHOUSE = Example("inhouse-api", True, True, needs=("redis", "rq"))


def require(config: pytest.Config, example: Example) -> None:
    for need in example.needs:
        if need == "node" and shutil.which("node") is None:
            missing(config, f"node (Node.js) for examples/{example.name}")
        if need == "rq" and not python3_has_rq():
            missing(config, "rq and redis for python3 on PATH (pip install -e '.[dev]')")
        if need == "redis" and not redis_answers():
            missing(config, f"Redis at {rediskit.url()} (scripts/install-infra.sh redis)")
        if need == "mcp" and not python3_has("mcp"):
            missing(config, "mcp for python3 on PATH (pip install -e '.[dev]')")
        if need == "sdks" and not python3_has("openai, stripe, slack_sdk"):
            need_sdks = "openai, stripe and slack_sdk for python3 on PATH (pip install -e '.[dev]')"
            missing(config, need_sdks)
        if need == "npm" and not (EXAMPLES / example.name / "node_modules").is_dir():
            missing(config, f"examples/{example.name}/node_modules (scripts/install-infra.sh npm)")
        if need == "bullmq" and not (EXAMPLES / example.name / "node_modules" / "bullmq").is_dir():
            missing(config, f"examples/{example.name}/node_modules (scripts/install-infra.sh npm)")


def python3_has(module: str) -> bool:
    """Whether the python3 on PATH (the one a crashpoint.toml runs) imports ``module``."""
    found = shutil.which("python3")
    if found is None:
        return False
    check = [found, "-c", f"import {module}"]
    return subprocess.run(check, capture_output=True, timeout=30, check=False).returncode == 0


def python3_has_rq() -> bool:
    # The example's crashpoint.toml runs "python3" from PATH, not this interpreter.
    found = shutil.which("python3")
    if found is None:
        return False
    check = [found, "-c", "import redis, rq"]
    return subprocess.run(check, capture_output=True, timeout=30, check=False).returncode == 0


def redis_answers() -> bool:
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(rediskit.url())
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), 1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class Config:
    """The parts of a crashpoint.toml the test drives, arguments made absolute."""

    path: Path
    command: list[str]
    enqueue: list[str]
    status: list[str]
    lease_ttl_s: float
    max_attempts: int
    providers: dict[str, str]

    @classmethod
    def load(cls, example: Example, variant: str) -> Config:
        path = EXAMPLES / example.name / variant
        doc = tomllib.loads(path.read_text())
        target = doc["target"]

        def argv(key: str) -> list[str]:
            # As the command target does: a word naming a file beside the config is absolute.
            return [
                str(path.parent / a) if not a.startswith("-") and (path.parent / a).exists() else a
                for a in target[key]
            ]

        return cls(
            path=path,
            command=argv("command"),
            enqueue=argv("enqueue"),
            status=argv("status"),
            lease_ttl_s=float(target["lease_ttl_s"]),
            max_attempts=int(target["max_attempts"]),
            providers={p["name"]: p["kind"] for p in doc["providers"]},
        )


@dataclass
class Trial:
    """One hand-run trial: a fresh state directory, its providers, its workers."""

    cfg: Config
    root: Path
    providers: dict[str, ProviderProcess]
    rendezvous: Rendezvous
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    @property
    def state(self) -> Path:
        return self.root / "state"

    def env(self, worker: str = "enqueue", *, recovery: bool = False) -> dict[str, str]:
        env = {
            **os.environ,
            "CRASHPOINT_STATE_DIR": str(self.state),
            "CRASHPOINT_WORKER_ID": worker,
            "CRASHPOINT_LEASE_TTL_S": repr(self.cfg.lease_ttl_s),
            "CRASHPOINT_HTTP_TIMEOUT_S": repr(HTTP_TIMEOUT_S),
            "CRASHPOINT_MAX_ATTEMPTS": str(self.cfg.max_attempts),
            **self.rendezvous.env,
            "REDIS_URL": rediskit.url(),
        }
        for name, p in self.providers.items():
            env[f"CRASHPOINT_PROVIDER_{provider_env_name(name)}_URL"] = p.url
            env[f"CRASHPOINT_PROVIDER_{provider_env_name(name)}_KIND"] = p.kind
        if recovery:
            env["CRASHPOINT_RECOVERY"] = "1"
        return env

    def enqueue(self, job: str, provider: str) -> None:
        payload = self.root / "jobs" / f"{job}.json"
        payload.parent.mkdir(exist_ok=True)
        body = {"job_id": job, "amount_cents": 1250, "customer": "c-42"}
        payload.write_text(json.dumps({"job_id": job, "provider": provider, "body": body}))
        args = [a.format(job_id=job, payload_file=str(payload)) for a in self.cfg.enqueue]
        done = subprocess.run(
            args, cwd=self.state, env=self.env(), capture_output=True, timeout=30, check=False
        )
        assert done.returncode == 0, done.stderr.decode(errors="replace")

    def start(self, name: str, *, recovery: bool = False) -> subprocess.Popen[bytes]:
        log = self.root / f"{name}.log"
        self.logs.append(log)
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                self.cfg.command,
                cwd=self.state,
                env=self.env(name, recovery=recovery),
                stdout=out,
                stderr=subprocess.STDOUT,
                # Its own group, so a kill reaches the worker's whole tree, as the harness's does.
                start_new_session=True,
            )
        self.workers.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        proc.wait(10)

    def status(self, job: str) -> dict[str, Any]:
        args = [a.format(job_id=job) for a in self.cfg.status]
        done = subprocess.run(
            args, cwd=self.state, env=self.env(), capture_output=True, timeout=30, check=False
        )
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        lines = done.stdout.decode().strip().splitlines()
        assert len(lines) == 1, done.stdout
        doc: dict[str, Any] = json.loads(lines[0])
        assert doc["state"] in (*FINAL, "pending"), doc
        return doc

    def wait_final(self, job: str, timeout_s: float = DONE_TIMEOUT_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            doc = self.status(job)
            if doc["state"] in FINAL:
                return doc
            if time.monotonic() > deadline:
                raise AssertionError(f"{job} still {doc} after {timeout_s} s\n{self.log_tail()}")
            time.sleep(0.05)

    def effects(self, provider: str, job: str) -> list[Any]:
        return [e for e in self.providers[provider].client.effects() if e.job_id == job]

    def writes(self, provider: str, job: str) -> list[Any]:
        arrivals = self.providers[provider].client.arrivals()
        return [a for a in arrivals if a.job_id == job and a.kind == "write"]

    def lookups(self, provider: str, job: str) -> list[Any]:
        arrivals = self.providers[provider].client.arrivals()
        return [a for a in arrivals if a.job_id == job and a.kind == "lookup"]

    def snapshot(self, into: Path) -> None:
        """Copy the state directory as it is (workers stopped): what a restore brings back."""
        shutil.copytree(self.state, into, ignore=shutil.ignore_patterns("*.sock"))

    def restore(self, snapshot: Path) -> None:
        for child in self.state.iterdir():
            if child.suffix != ".sock":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        shutil.copytree(snapshot, self.state, dirs_exist_ok=True)

    def log_tail(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in self.logs
        )

    def close(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                self.kill(proc)


@pytest.fixture
def scratch() -> Iterator[Path]:
    # Short, for the failpoint socket's 107-byte limit.
    path = Path(tempfile.mkdtemp(prefix="cpx-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def trial(example: Example, variant: str, scratch: Path) -> Iterator[Trial]:
    cfg = Config.load(example, variant)
    (scratch / "state").mkdir()
    with contextlib.ExitStack() as stack:
        providers = {
            name: stack.enter_context(
                start_provider(kind, state_path=scratch / f"{name}.db", name=name)
            )
            for name, kind in cfg.providers.items()
        }
        rendezvous = stack.enter_context(Rendezvous(scratch / "state" / "fp.sock"))
        t = Trial(cfg, scratch, providers, rendezvous)
        stack.callback(t.close)
        try:
            yield t
        except BaseException:
            print(t.log_tail())
            raise
    assert leftovers(scratch) == []


def leftovers(scratch: Path) -> list[str]:
    out = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if proc.environ().get("CRASHPOINT_STATE_DIR", "").startswith(str(scratch)):
                out.append(f"{proc.pid} {' '.join(proc.info['cmdline'] or [])}")
    return out


def touched(example: Example, cfg: Config, job_provider: str) -> dict[str, int]:
    """The effects a correct run leaves per provider for one job."""
    return {
        name: 1 if example.calls_every_provider or name == job_provider else 0
        for name in cfg.providers
    }


def effect_counts(t: Trial, job: str) -> dict[str, int]:
    return {name: len(t.effects(name, job)) for name in t.providers}


# -- the correct variants ---------------------------------------------------------------


@pytest.mark.parametrize("example", ALL)
def test_a_kill_after_the_call_is_reconciled_not_repeated(
    example: Example, scratch: Path, pytestconfig: pytest.Config
) -> None:
    require(pytestconfig, example)
    with trial(example, "crashpoint.toml", scratch) as t:
        gate = t.rendezvous.hold("after_external_call", job="j-0001")
        t.enqueue("j-0001", "billing")
        first = t.start("w1")
        hit = gate.wait(DONE_TIMEOUT_S)
        assert hit.peer_pid == first.pid
        t.kill(first)
        t.start("w2")
        assert t.wait_final("j-0001")["state"] == "done"
        assert effect_counts(t, "j-0001") == touched(example, t.cfg, "billing")
        # The recovering worker asked before it wrote: one write, then a lookup.
        assert len(t.writes("billing", "j-0001")) == 1
        assert t.lookups("billing", "j-0001")


@pytest.mark.parametrize("example", ALL)
def test_a_kill_while_the_plain_provider_holds_the_send_is_reconciled_by_marker(
    example: Example, scratch: Path, pytestconfig: pytest.Config
) -> None:
    require(pytestconfig, example)
    with trial(example, "crashpoint.toml", scratch) as t:
        assert t.cfg.providers["mailer"] == "plain"
        mailer = t.providers["mailer"].client
        fault = mailer.arm(Fault("hold_after_commit", job="j-0001"))
        t.enqueue("j-0001", "mailer")
        first = t.start("w1")
        held = mailer.wait_held(fault, timeout_s=DONE_TIMEOUT_S)
        assert held.committed
        t.kill(first)
        # Released before the dead worker's lease runs out, as the harness does.
        mailer.release(fault, outcome="respond")
        t.start("w2")
        doc = t.wait_final("j-0001")
        assert doc["state"] == "done", doc
        assert effect_counts(t, "j-0001") == touched(example, t.cfg, "mailer")
        (effect,) = t.effects("mailer", "j-0001")
        assert effect.client_marker
        markers = {a.client_marker for a in t.lookups("mailer", "j-0001")}
        assert markers == {effect.client_marker}
        assert doc.get("external_ref") == str(effect.id)


@pytest.mark.parametrize("example", ALL)
def test_a_second_delivery_while_the_first_is_in_flight_makes_no_second_effect(
    example: Example, scratch: Path, pytestconfig: pytest.Config
) -> None:
    require(pytestconfig, example)
    with trial(example, "crashpoint.toml", scratch) as t:
        gate = t.rendezvous.hold("before_external_call", job="j-0001")
        t.start("w1")
        t.start("w2")
        t.enqueue("j-0001", "billing")
        hit = gate.wait(DONE_TIMEOUT_S)
        t.enqueue("j-0001", "billing")  # at-least-once: the same job again, mid-flight
        # Two leases: the other worker takes the second delivery meanwhile, and the owner
        # keeps its lease only if it renews while it waits.
        time.sleep(2 * t.cfg.lease_ttl_s)
        assert hit.resume()
        doc = t.wait_final("j-0001")
        assert doc["state"] == "done", doc
        assert effect_counts(t, "j-0001") == touched(example, t.cfg, "billing")
        if example.renews_while_blocked:
            # The second delivery saw the job taken and left it to its owner.
            assert doc["attempts"] == 1, doc


@pytest.mark.parametrize("example", ALL)
def test_failures_before_commit_stop_at_the_declared_cap_and_dead_letter(
    example: Example, scratch: Path, pytestconfig: pytest.Config
) -> None:
    require(pytestconfig, example)
    with trial(example, "crashpoint.toml", scratch) as t:
        t.providers["billing"].client.arm(
            Fault("fail_before_commit", job="j-0001", times=20, status=503)
        )
        t.enqueue("j-0001", "billing")
        t.start("w1")
        doc = t.wait_final("j-0001")
        assert doc["state"] == "dead_lettered", doc
        assert len(t.writes("billing", "j-0001")) == t.cfg.max_attempts
        assert effect_counts(t, "j-0001") == dict.fromkeys(t.cfg.providers, 0)


@pytest.mark.parametrize("example", ALL)
def test_after_a_restore_every_unfinished_job_is_reconciled_before_any_write(
    example: Example, scratch: Path, pytestconfig: pytest.Config
) -> None:
    require(pytestconfig, example)
    with trial(example, "crashpoint.toml", scratch) as t:
        t.enqueue("j-0001", "mailer")
        t.snapshot(scratch / "snapshot")  # the job is queued, nothing sent yet
        worker = t.start("w1")
        assert t.wait_final("j-0001")["state"] == "done"
        t.kill(worker)
        want = touched(example, t.cfg, "mailer")
        assert effect_counts(t, "j-0001") == want
        t.restore(scratch / "snapshot")
        assert t.status("j-0001")["state"] == "pending"
        t.start("w2", recovery=True)
        assert t.wait_final("j-0001")["state"] == "done"
        # The plain mailer would take a second send; recovery looked it up instead.
        assert effect_counts(t, "j-0001") == want
        assert t.lookups("mailer", "j-0001")


# -- the buggy variants: each shows its bug ------------------------------------------------


def kill_after_the_call_and_recover(t: Trial) -> None:
    gate = t.rendezvous.hold("after_external_call", job="j-0001")
    t.enqueue("j-0001", "billing")
    first = t.start("w1")
    gate.wait(DONE_TIMEOUT_S)
    t.kill(first)
    t.start("w2")
    t.wait_final("j-0001")


@pytest.mark.parametrize(
    ("example", "variant"),
    [
        pytest.param(RQ, "crashpoint-buggy-new-key-on-retry.toml", id="rq-worker"),
        pytest.param(NODE, "crashpoint-buggy.toml", id="node-worker"),
        pytest.param(BULLMQ, "crashpoint-buggy-new-key-on-retry.toml", id="bullmq-worker"),
    ],
)
def test_a_new_key_on_retry_makes_a_second_effect(
    example: Example, variant: str, scratch: Path, pytestconfig: pytest.Config
) -> None:
    require(pytestconfig, example)
    with trial(example, variant, scratch) as t:
        kill_after_the_call_and_recover(t)
        effects = t.effects("billing", "j-0001")
        assert len(effects) == 2, effects
        assert len({e.idempotency_key for e in effects}) == 2


def test_rq_close_without_effect_marks_done_with_no_receipt(
    scratch: Path, pytestconfig: pytest.Config
) -> None:
    require(pytestconfig, RQ)
    for variant, receipts in (
        ("crashpoint.toml", 1),
        ("crashpoint-buggy-close-without-effect.toml", 0),
    ):
        here = scratch / variant.removesuffix(".toml")
        here.mkdir()
        with trial(RQ, variant, here) as t:
            t.providers["mailer"].client.arm(Fault("fail_before_commit", job="j-0001", status=502))
            t.enqueue("j-0001", "mailer")
            t.start("w1")
            assert t.wait_final("j-0001")["state"] == "done"
            assert len(t.effects("billing", "j-0001")) == 1
            assert len(t.effects("mailer", "j-0001")) == receipts, variant


def test_rq_no_cap_writes_past_the_declared_maximum(
    scratch: Path, pytestconfig: pytest.Config
) -> None:
    require(pytestconfig, RQ)
    with trial(RQ, "crashpoint-buggy-no-cap.toml", scratch) as t:
        assert t.cfg.max_attempts == 3
        t.providers["billing"].client.arm(Fault("fail_before_commit", job="j-0001", times=20))
        t.enqueue("j-0001", "billing")
        t.start("w1")
        assert t.wait_final("j-0001")["state"] == "dead_lettered"
        assert len(t.writes("billing", "j-0001")) == 6 > t.cfg.max_attempts


def test_every_example_declares_what_the_matrix_needs() -> None:
    for example in (RQ, NODE, BULLMQ):
        # The correct variant and the buggy ones (crashpoint-docker.toml packages the same
        # worker into an image, for one provider, and is checked by the docker tests).
        variants = [
            "crashpoint.toml",
            *(p.name for p in EXAMPLES.glob(f"{example.name}/crashpoint-buggy*.toml")),
        ]
        for path in [EXAMPLES / example.name / v for v in sorted(variants)]:
            doc = tomllib.loads(path.read_text())
            target = doc["target"]
            assert {"name", "command", "workers", "lease_ttl_s", "enqueue"} <= set(target), path
            assert isinstance(target["max_attempts"], int), path
            assert "{job_id}" in target["status"], path
            kinds = {p["name"]: p["kind"] for p in doc["providers"]}
            assert kinds == {"billing": "idempotent", "mailer": "plain"}, path
            if example is not NODE:
                # A broker of their own per trial, which broker_restart restarts.
                assert target["broker"] == {"kind": "redis", "env": "REDIS_URL"}, path
        assert (EXAMPLES / example.name / "README.md").is_file()


def test_every_sdk_example_declares_its_personas() -> None:
    expected = {
        AGENT_SDK: {"model": "openai", "billing": "stripe", "chat": "slack"},
        NODE_SDK: {"billing": "stripe", "mailer": "resend"},
        SMTP_NODE: {"mailer": "smtp"},
    }
    for example, kinds in expected.items():
        here = EXAMPLES / example.name
        variants = ["crashpoint.toml", *(p.name for p in here.glob("crashpoint-*.toml"))]
        for path in [here / v for v in sorted(variants)]:
            doc = tomllib.loads(path.read_text())
            target = doc["target"]
            assert {"name", "command", "workers", "lease_ttl_s", "enqueue"} <= set(target), path
            assert isinstance(target["max_attempts"], int), path
            assert "{job_id}" in target["status"], path
            assert {p["name"]: p["kind"] for p in doc["providers"]} == kinds, path
        assert (here / "README.md").is_file()
    # The SDKs are pinned, and the lock file names no registry (npm ci uses the one set).
    lock = (EXAMPLES / NODE_SDK.name / "package-lock.json").read_text()
    assert '"resolved"' not in lock
    deps = json.loads((EXAMPLES / NODE_SDK.name / "package.json").read_text())["dependencies"]
    assert deps == {"resend": "6.38.0", "stripe": "23.2.0"}
    lock = (EXAMPLES / SMTP_NODE.name / "package-lock.json").read_text()
    assert '"resolved"' not in lock
    deps = json.loads((EXAMPLES / SMTP_NODE.name / "package.json").read_text())["dependencies"]
    assert deps == {"nodemailer": "10.6.1"}
