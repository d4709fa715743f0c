"""The target's own image: ``[target.docker]`` under ``--backend docker``.

The image is the Node example built (examples/node-worker/Dockerfile) on crashpoint's
Debian test image, which ``scripts/build-test-image.sh`` makes with debootstrap from
Debian's packages: its Node.js is Debian's, not the host's, and nothing of the host is
mounted into the worker's container but the trial's state directory. The real CLI runs
in a subprocess, so configuration, the build, enqueue, kills, pauses, the oracle, the
exit code and the reaping are the shipped ones.
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clikit import ROOT, cli, leftovers, results

from harness.backends.docker import DockerBackend, connect
from harness.backends.images import BUILD_REPO, CACHE_LABEL, UserImage, context_hash, prepare
from harness.contract.errors import InfrastructureError
from harness.pytest_plugin import missing
from harness.rendezvous import Rendezvous
from harness.targets.config import DockerConfig, Mount, load_config
from harness.watchdog import RUN_LABEL

pytestmark = [pytest.mark.process, pytest.mark.docker]

BASE = "crashpoint-debian-node:1"
EXAMPLE = ROOT / "examples" / "node-worker"
DOCKER_TOML = EXAMPLE / "crashpoint-docker.toml"
#: Every non-network cell of these four holds: 10 cells with the example's one provider
#: (``nox -s examples``); the default run plays a kill and a stop, 4 cells.
SCENARIOS = (
    "crash_before_external_call",
    "crash_after_external_success",
    "crash_during_external_call",
    "lease_expiry_slow_worker",
)
KILL_AND_STOP = ("crash_after_external_success", "lease_expiry_slow_worker")
CLI_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def client(pytestconfig: pytest.Config) -> Iterator[Any]:
    try:
        c = connect(timeout_s=10)
    except InfrastructureError as exc:
        missing(pytestconfig, str(exc))
    try:
        c.images.get(BASE)
    except Exception:
        c.close()
        missing(pytestconfig, f"the test image {BASE}; run bash scripts/build-test-image.sh")
    yield c
    c.close()


def in_image(config: Path, *args: str) -> list[str]:
    """``crashpoint run`` of ``config`` under the docker backend, then ``args``."""
    return [*cli(), "run", "-c", str(config), "--backend", "docker", *args]


def run(argv: list[str], scratch: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(scratch)}
    return subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False
    )


def variant(tmp_path: Path, *, command: str | None = None, build: Path = EXAMPLE) -> Path:
    """crashpoint-docker.toml moved out of the example, with another command or build
    directory (its other paths made absolute)."""
    text = DOCKER_TOML.read_text()
    for old, new in (
        ('build = "."', f"build = {json.dumps(str(build))}"),
        ('"enqueue.js"', json.dumps(str(EXAMPLE / "enqueue.js"))),
        ('"status.js"', json.dumps(str(EXAMPLE / "status.js"))),
        *([('command = ["node", "worker.js"]', command)] if command else []),
    ):
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / "crashpoint-docker.toml"
    path.write_text(text)
    return path


def containers_of(client: Any, scratch: Path) -> list[Any]:
    """The run-labelled containers of the runs whose trial directories are in ``scratch``
    (their TMPDIR): the engine is shared with other tests' runs, which this must not see."""
    found = []
    for c in client.containers.list(all=True, filters={"label": RUN_LABEL}, ignore_removed=True):
        env = c.attrs["Config"]["Env"] or []
        if any(e.startswith(f"CRASHPOINT_STATE_DIR={scratch}") for e in env):
            found.append(c)
    return found


def run_labelled(client: Any, run_id: str) -> dict[str, list[Any]]:
    label = {"label": f"{RUN_LABEL}={run_id}"}
    return {
        "containers": client.containers.list(all=True, filters=label, ignore_removed=True),
        "volumes": client.volumes.list(filters=label),
        "images": client.images.list(filters=label),
    }


@pytest.mark.parametrize(
    ("scenarios", "cells"),
    [
        pytest.param(KILL_AND_STOP, 4, id="kill-and-stop"),
        pytest.param(SCENARIOS, 10, id="every-non-network", marks=pytest.mark.matrix),
    ],
)
def test_node_example_in_its_image_holds_its_non_network_cells(
    client: Any, scratch: Path, tmp_path: Path, scenarios: tuple[str, ...], cells: int
) -> None:
    out = tmp_path / "out"
    argv = in_image(DOCKER_TOML, "-j", "2", "--seed", "7", "--out", str(out))
    for name in scenarios:
        argv += ["--scenario", name]
    done = run(argv, scratch)
    assert done.returncode == 0, done.stderr
    doc = results(out)
    assert len(doc["trials"]) == cells
    assert {t["scenario"] for t in doc["trials"]} == set(scenarios)
    ids: set[str] = set()
    for t in doc["trials"]:
        assert (t["verdict"], t["reached"], t["backend"]) == ("held", True, "docker"), t["reason"]
        starts = [e["fields"] for e in t["events"] if e["kind"] == "worker_start"]
        assert starts, t["id"]
        for start in starts:
            # In the example's own build, with its command as written (run in /app).
            assert start["image"].startswith("crashpoint-build:"), start
            assert start["argv"] == ["node", "worker.js"], start
            ids.add(start["container"])
        exits = {e["fields"].get("container") for e in t["events"] if e["kind"] == "worker_exit"}
        assert {s["container"] for s in starts} <= exits, t["id"]
    assert len(ids) >= 2 * cells, "each worker of each trial is a container of its own"
    assert all(v == [] for v in run_labelled(client, doc["run_id"]).values())
    assert leftovers(scratch) == []


NETWORK = ("ambiguous_timeout", "reset_after_commit", "provider_down_during_reconcile")


@pytest.mark.toxiproxy
def test_node_example_in_its_image_holds_the_network_cells(
    client: Any, scratch: Path, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    """The container shares the host's network, so it reaches Toxiproxy's proxies."""
    out = tmp_path / "out"
    argv = in_image(DOCKER_TOML, "-j", "2", "--seed", "7", "--out", str(out))
    for name in NETWORK:
        argv += ["--scenario", name]
    done = run(argv, scratch)
    trials = results(out)["trials"] if (out / "results.json").exists() else []
    skipped = [t["reason"] for t in trials if t["verdict"] == "skipped"]
    if skipped:
        missing(pytestconfig, skipped[0])
    assert done.returncode == 0, done.stderr
    assert {t["scenario"] for t in trials} == set(NETWORK)
    for t in trials:
        assert (t["verdict"], t["backend"]) == ("held", "docker"), t["reason"]
    assert leftovers(scratch) == []


def test_node_example_with_a_fresh_key_per_attempt_is_caught_in_its_image(
    client: Any, scratch: Path, tmp_path: Path
) -> None:
    config = variant(tmp_path, command='command = ["node", "worker.js", "--bug", "fresh-key"]')
    out = tmp_path / "out"
    scenario = ["--scenario", "crash_after_external_success", "--signal", "SIGKILL"]
    done = run(in_image(config, *scenario, "--out", str(out), "--seed", "7"), scratch)
    assert done.returncode == 1, done.stderr
    (trial,) = results(out)["trials"]
    assert (trial["verdict"], trial["reached"]) == ("violated", True)
    broken = {v["invariant"] for v in trial["violations"]}
    assert broken & {"no_duplicate_effect", "stable_key_and_payload"}, broken
    argv = [e["fields"]["argv"] for e in trial["events"] if e["kind"] == "worker_start"]
    assert argv[0] == ["node", "worker.js", "--bug", "fresh-key"]


def test_a_build_is_made_once_then_kept_as_a_cache(client: Any, tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {BASE}\nCOPY hello.js /app/\n")
    (context / "hello.js").write_text(f"console.log({time.time_ns()})\n")  # a new build
    config = tmp_path / "crashpoint.toml"
    config.write_text(
        variant(tmp_path, build=context).read_text().replace('workdir = "/app"\n', "")
    )
    command = load_config(config)
    made: list[str] = []
    try:
        first = prepare(command, client)
        assert first is not None
        made.append(first.ref)
        image = client.images.get(first.ref)
        assert image.labels[CACHE_LABEL] == "build"
        assert RUN_LABEL not in image.labels, "a cache must not be swept with a run"
        again = prepare(command, client)
        assert again is not None
        assert again.ref == first.ref
        assert client.images.get(again.ref).attrs["Created"] == image.attrs["Created"]
        (context / "hello.js").write_text("console.log('changed')\n")
        changed = prepare(command, client)
        assert changed is not None
        made.append(changed.ref)
        assert changed.ref != first.ref
        # The build of the earlier content is pruned once the new one exists.
        assert not client.images.list(name=first.ref)
    finally:
        for ref in made:
            with contextlib.suppress(Exception):
                client.images.remove(ref, force=True)


# The worker's view from inside: its user, directory, settings, mounts and failpoints.
INSIDE_JS = """
const fs = require('fs'), net = require('net');
const out = {
  uid: process.getuid(), cwd: process.cwd(), node: process.version,
  greeting: fs.readFileSync(process.env.GREETING_FILE, 'utf8'),
  pythonpath: process.env.PYTHONPATH || null, path: process.env.PATH,
  worker: process.env.CRASHPOINT_WORKER_ID,
};
try { fs.writeFileSync('/fixtures/x', '1'); out.readOnly = 'writable'; }
catch (e) { out.readOnly = e.code; }
const fp = net.createConnection(process.env.CRASHPOINT_FAILPOINTS).setEncoding('utf8');
fp.on('data', (line) => {
  out.reply = JSON.parse(line.split('\\n')[0]).action;
  fs.writeFileSync(process.env.CRASHPOINT_STATE_DIR + '/inside.json', JSON.stringify(out));
  process.exit(0);
});
fp.write(JSON.stringify({point: 'before_external_call', job: 'j-0001', attempt: 1,
                         pid: process.pid}) + '\\n');
"""


def test_the_workers_settings_reach_it_in_its_image(
    client: Any, scratch: Path, tmp_path: Path
) -> None:
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    (fixtures / "greeting").write_text("hello")
    state = Path(tempfile.mkdtemp(prefix="cp-", dir=scratch))
    settings = DockerConfig(
        image=BASE,
        env=(("GREETING_FILE", "/fixtures/greeting"),),
        workdir="/fixtures",
        mounts=(Mount(fixtures, "/fixtures", read_only=True),),
        user="65534:65534",
    )
    mine = UserImage(ref=BASE, settings=settings, config_path=tmp_path / "crashpoint.toml")
    backend = DockerBackend(client=client, image=mine)
    try:
        with Rendezvous(state / "fp.sock") as rv:
            gate = rv.hold("before_external_call")
            env = {**os.environ, **rv.env, "CRASHPOINT_STATE_DIR": str(state)}
            env["PYTHONPATH"] = "/host/only"
            env["CRASHPOINT_WORKER_ID"] = "w1"
            handle = backend.start("w1", ["node", "-e", INSIDE_JS], env=env, cwd=state)
            gate.wait(30).resume()
            assert handle.wait(30) == 0, handle.stderr_path.read_text()
        inside = json.loads((state / "inside.json").read_text())
    finally:
        backend.close()
    assert inside["uid"] == 65534
    assert inside["cwd"] == "/fixtures"
    assert inside["greeting"] == "hello"
    assert inside["readOnly"] == "EROFS"
    assert inside["reply"] == "continue"
    assert inside["worker"] == "w1"
    # The image's own environment and runtime, not the host's.
    assert inside["pythonpath"] is None
    assert inside["path"] == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert inside["node"].startswith("v18."), "Debian bookworm's nodejs, not the host's"


def test_sigkilled_harness_leaves_no_container_volume_or_run_image(
    client: Any, scratch: Path, tmp_path: Path
) -> None:
    # The example with a VOLUME: every worker container gets an anonymous volume.
    context = tmp_path / "context"
    shutil.copytree(EXAMPLE, context, ignore=shutil.ignore_patterns("*.toml", "*.md"))
    dockerfile = context / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "VOLUME /scratch\n")
    config = variant(tmp_path, build=context)
    harness = subprocess.Popen(
        in_image(config, "--scenario", "lease_expiry_slow_worker", "--out", str(tmp_path / "o")),
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(scratch)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    run_id = volumes = None
    try:
        deadline = time.monotonic() + 240  # the first build of this context included
        while run_id is None:
            assert harness.poll() is None, f"crashpoint exited {harness.returncode} too soon"
            assert time.monotonic() < deadline, "no worker container of this run appeared"
            for c in containers_of(client, scratch):
                run_id = c.labels[RUN_LABEL]
                volumes = [m["Name"] for m in c.attrs["Mounts"] if m["Type"] == "volume"]
            time.sleep(0.1)
        assert volumes, "the image's VOLUME should give the container a volume"
        harness.send_signal(signal.SIGKILL)  # the harness alone: its watchdog must reap
        harness.wait()

        def gone() -> bool:
            left = run_labelled(client, run_id)
            names = {v.name for v in client.volumes.list()}
            return all(v == [] for v in left.values()) and not names & set(volumes)

        deadline = time.monotonic() + 20
        while not gone():
            assert time.monotonic() < deadline, f"left behind: {run_labelled(client, run_id)}"
            time.sleep(0.2)
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
        if run_id is not None:
            from harness.backends.docker import sweep

            sweep(run_id, client)
    # The build is a cache, not a thing of the run: the next run would start from it.
    build = client.images.get(f"{BUILD_REPO}:{context_hash(context, client)}")
    assert build.labels[CACHE_LABEL] == "build"
    client.images.remove(build.id, force=True)  # this test's own context: nobody reuses it


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('image = "crashpoint-no-such-image:1"', "target.docker.image"),
        ("build = 'broken'", "target.docker.build"),
    ],
    ids=["image-not-local", "build-fails"],
)
def test_an_image_that_cannot_be_had_is_one_line_and_exit_2(
    client: Any, table: str, says: str, scratch: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "Dockerfile").write_text(f"FROM {BASE}\nRUN exit 7\n")
    config = variant(tmp_path)
    config.write_text(config.read_text().replace(f"build = {json.dumps(str(EXAMPLE))}", table))
    done = run(in_image(config, "--out", str(tmp_path / "out")), scratch)
    assert done.returncode == 2, done.stderr
    # The run's first line names its target; then the one line that says what is wrong.
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2, done.stderr
    assert lines[0].startswith("target: "), lines[0]
    assert lines[1].startswith(f"crashpoint: {config}: {says}"), lines[1]
    assert not (tmp_path / "out" / "results.json").exists()
    assert containers_of(client, scratch) == []
