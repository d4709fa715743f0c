"""Process backend: every descendant of a worker is killed, paused and reaped.

Real trees, real signals: a worker that double-forks a ``setsid`` daemon, one that
ignores SIGTERM, one whose children fork further. After the kill, no process carrying the
test's marker is left on the machine. Under cgroup v2 nothing escapes; the process-group
fallback is tested for what it promises (the tree it can see).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from clikit import ROOT, leftovers, results, run
from treekit import (
    CHAIN,
    assert_frozen,
    fields_of,
    marked,
    start_tree,
    ticking,
    ticks_again,
    until,
)

from harness.backends.cgroup import CGROUP2, PROCESS_GROUP
from harness.backends.process import ProcessBackend
from harness.contract.env import CONTAINMENT
from harness.contract.errors import InfrastructureError
from harness.history import History
from harness.pytest_plugin import missing

pytestmark = pytest.mark.process


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="cp-") as d:
        yield Path(d)


# Every backend fixture takes the workdir, so the backend (and the trees it started,
# which write into the workdir) is closed before the workdir is removed.
@pytest.fixture
def cgroup_backend(pytestconfig: pytest.Config, workdir: Path) -> Iterator[ProcessBackend]:
    backend = ProcessBackend(history=History(), containment=CGROUP2)
    try:
        backend.containment  # noqa: B018 (makes the backend's cgroup, or says why not)
    except InfrastructureError as exc:
        missing(pytestconfig, f"cgroup v2 (root and a v2 hierarchy): {exc}")
    yield backend
    backend.close()


@pytest.fixture(params=[CGROUP2, PROCESS_GROUP])
def backend(request: pytest.FixtureRequest, workdir: Path) -> Iterator[ProcessBackend]:
    if request.param == CGROUP2:
        yield request.getfixturevalue("cgroup_backend")
        return
    with ProcessBackend(history=History(), containment=PROCESS_GROUP) as b:
        yield b


def test_a_double_forked_setsid_daemon_dies_with_its_worker(
    cgroup_backend: ProcessBackend, workdir: Path, marker: str
) -> None:
    handle = start_tree(cgroup_backend, workdir, marker, "--daemon", roles=["w", "w-daemon"])
    daemon = [p for p in marked(marker) if p.pid != handle.pid]
    assert daemon, "the daemon should be running"
    # It left the worker's session and tree: no process group or psutil walk finds it.
    assert os.getsid(daemon[0].pid) != os.getsid(handle.pid)
    assert daemon[0].pid not in [c.pid for c in psutil.Process(handle.pid).children(True)]
    handle.signal(signal.SIGKILL)
    assert handle.wait(5) == -signal.SIGKILL
    cgroup_backend.close()
    assert marked(marker) == []
    (start,) = fields_of(cgroup_backend._history, "worker_start")
    assert start["containment"] == CGROUP2
    assert handle.cgroup is not None
    assert not handle.cgroup.exists(), "the worker's cgroup is removed once it is reaped"


def test_a_daemon_left_by_a_worker_that_exited_is_reaped_at_stop(
    cgroup_backend: ProcessBackend, workdir: Path, marker: str
) -> None:
    handle = start_tree(cgroup_backend, workdir, marker, "--daemon", "--exit")
    assert handle.wait(10) == 0
    ticking(workdir, ["w-daemon"])
    assert handle.stop(timeout_s=1.0) == 0
    assert marked(marker) == []


def test_pause_freezes_the_grandchildren_and_the_daemon(
    cgroup_backend: ProcessBackend, workdir: Path, marker: str
) -> None:
    roles = [*CHAIN, "w-daemon"]
    handle = start_tree(cgroup_backend, workdir, marker, "--daemon", "--spawn", "2", roles=roles)
    procs = marked(marker)
    assert len(procs) == len(roles)
    # What the trial reads file locks and CPU time of: the daemon too.
    assert sorted(handle.tree()) == sorted(p.pid for p in procs)
    handle.pause()
    assert_frozen(workdir, roles, procs)
    handle.resume()
    ticks_again(workdir, roles)


def test_pause_of_the_fallback_stops_the_tree_it_sees(workdir: Path, marker: str) -> None:
    with ProcessBackend(containment=PROCESS_GROUP) as backend:
        handle = start_tree(backend, workdir, marker, "--spawn", "2", roles=CHAIN)
        procs = marked(marker)
        handle.pause()
        # SIGSTOP is delivered asynchronously: wait until the kernel says stopped.
        until(
            lambda: all(p.status() == psutil.STATUS_STOPPED for p in procs),
            what="SIGSTOP to reach the tree",
        )
        assert_frozen(workdir, CHAIN, procs)
        handle.resume()
    assert marked(marker) == []


def test_a_sigterm_ignoring_tree_is_escalated_to_sigkill(
    backend: ProcessBackend, workdir: Path, marker: str
) -> None:
    handle = start_tree(backend, workdir, marker, "--ignore-term", "--spawn", "2", roles=CHAIN)
    assert handle.stop(timeout_s=0.3) == -signal.SIGKILL
    assert marked(marker) == []
    (escalation,) = fields_of(backend._history, "escalate")
    assert escalation["worker"] == "w1"
    assert escalation["signal"] == "SIGTERM"
    assert escalation["grace_s"] == 0.3
    assert "outlived SIGTERM for 0.3 s, so SIGKILL was sent" in str(escalation["text"])
    (start,) = fields_of(backend._history, "worker_start")
    assert start["containment"] == handle.containment == backend.containment


def test_a_worker_that_exits_on_sigterm_is_not_escalated(
    backend: ProcessBackend, workdir: Path, marker: str
) -> None:
    handle = start_tree(backend, workdir, marker, "--exit-on-term", roles=["w"])
    assert handle.stop(timeout_s=5.0) == 0
    assert fields_of(backend._history, "escalate") == []


def test_a_chain_of_children_dies_with_sigkill(
    backend: ProcessBackend, workdir: Path, marker: str
) -> None:
    handle = start_tree(
        backend, workdir, marker, "--spawn", "3", roles=[*CHAIN, "w-child-child-child"]
    )
    handle.signal(signal.SIGKILL)
    assert handle.wait(5) == -signal.SIGKILL
    backend.close()
    assert marked(marker) == []


def test_the_switch_forces_the_fallback_and_the_history_says_so(
    workdir: Path, marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONTAINMENT, PROCESS_GROUP)
    with ProcessBackend(history=History()) as backend:
        handle = start_tree(backend, workdir, marker, roles=["w"])
        assert handle.cgroup is None
        assert (
            Path(f"/proc/{handle.pid}/cgroup").read_text() == Path("/proc/self/cgroup").read_text()
        ), "the fallback makes no cgroup"
    (start,) = fields_of(backend._history, "worker_start")
    assert start["containment"] == PROCESS_GROUP
    assert start["containment_note"] == f"{CONTAINMENT}={PROCESS_GROUP}"
    assert marked(marker) == []


def test_the_worker_is_in_its_cgroup_before_it_runs(
    cgroup_backend: ProcessBackend, workdir: Path
) -> None:
    # The worker's first act is to read its own cgroup: it is already the slot's, and its
    # environment is exactly what it was given (the shim adds no PWD).
    code = (
        "import os\n"
        "print([l for l in open('/proc/self/cgroup').read().splitlines() if l[:3] == '0::'][0])\n"
        "print(os.environ.get('PWD'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PWD"}
    handle = cgroup_backend.start("w1", [sys.executable, "-c", code], env=env, cwd=workdir)
    assert handle.wait(10) == 0
    assert handle.cgroup is not None
    own, pwd = handle.stdout_path.read_text().splitlines()
    assert own.endswith(f"/{handle.cgroup.name}")
    assert pwd == "None"


def test_a_missing_program_fails_to_start_as_before(
    cgroup_backend: ProcessBackend, workdir: Path
) -> None:
    with pytest.raises(InfrastructureError, match="could not start worker 'w1'"):
        cgroup_backend.start("w1", ["no-such-program-here"], env=dict(os.environ), cwd=workdir)


# A stand-in harness: a watchdog, a cgroup-contained worker that leaves a daemon; it
# reports the worker's cgroup, then waits to be SIGKILLed.
STANDIN = """
import json, os, sys, time
from pathlib import Path
from harness.watchdog import Watchdog
from harness.backends.process import ProcessBackend
from treekit import tick_argv, ticking
info_path, marker, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
watchdog = Watchdog.start()
backend = ProcessBackend(watchdog=watchdog, containment="cgroup2")
worker = backend.start("w1", tick_argv(work, marker, "--daemon"), env=dict(os.environ), cwd=work)
ticking(work, ["w", "w-daemon"])
Path(info_path + ".tmp").write_text(json.dumps({"cgroup": str(worker.cgroup)}))
os.rename(info_path + ".tmp", info_path)
time.sleep(60)
"""


def test_a_sigkilled_harness_leaves_no_daemon_and_no_cgroup(
    cgroup_backend: ProcessBackend, workdir: Path, marker: str
) -> None:
    (workdir / "standin.py").write_text(STANDIN)
    info_path = workdir / "info.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    harness = subprocess.Popen(
        [sys.executable, "standin.py", str(info_path), marker, str(workdir)],
        cwd=workdir,
        env=env,
        start_new_session=True,
    )
    try:
        until(info_path.exists, timeout_s=20, what="the stand-in harness to start its worker")
        cgroup = Path(json.loads(info_path.read_text())["cgroup"])
        assert len((cgroup / "cgroup.procs").read_text().split()) == 2, "worker and daemon"
        harness.kill()
        harness.wait()
        until(lambda: marked(marker) == [], what="the watchdog to kill the worker's cgroup")
        until(lambda: not cgroup.parent.exists(), what="the watchdog to remove the cgroups")
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()


def test_a_trial_of_a_sigterm_ignoring_worker_escalates_and_the_report_says_so(
    scratch: Path, tmp_path: Path
) -> None:
    # The pyqueue worker with SIGTERM ignored and a grace of its own (0.4 s), through the
    # real CLI: the SIGTERM cell still holds, and results.json and the page say what
    # happened and how the worker was contained.
    config = ROOT / "tests" / "process" / "workers" / "pyqueue" / "crashpoint-ignores-term.toml"
    out = tmp_path / "out"
    args = ["-c", str(config), "--scenario", "crash_after_external_success"]
    proc = run([*args, "--signal", "SIGTERM", "--seed", "3", "--out", str(out)], scratch)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (trial,) = results(out)["trials"]
    assert trial["verdict"] == "held", trial["reason"]
    with ProcessBackend() as probe:
        assert trial["containment"] == probe.containment
    of_w1 = [e for e in trial["events"] if e["fields"].get("worker") == "w1"]
    sent = [e["fields"]["signal"] for e in of_w1 if e["kind"] == "signal"]
    assert sent == ["SIGTERM", "SIGKILL"], "SIGTERM, then after the grace SIGKILL"
    (escalation,) = [e for e in of_w1 if e["kind"] == "escalate"]
    assert escalation["fields"]["grace_s"] == 0.4
    (exit_,) = [e for e in of_w1 if e["kind"] == "worker_exit"]
    assert exit_["fields"]["status"] == "killed by SIGKILL"
    assert exit_["t"] >= escalation["t"]
    page = (out / "trials" / f"{trial['id']}.html").read_text()
    assert "SIGTERM was not enough" in page
    assert "w1 outlived SIGTERM for 0.4 s, so SIGKILL was sent" in page
    assert f"<dt>containment</dt><dd>{trial['containment']}</dd>" in page
    assert leftovers(scratch) == []


# A worker that makes a cgroup of its own inside its slot and moves into it, with a child.
NESTS = """
import os, subprocess, sys, time
from pathlib import Path
from harness.backends.cgroup import own_cgroup, v2_mount
mine = v2_mount(Path("/proc/self/mounts").read_text()) / own_cgroup(
    Path("/proc/self/cgroup").read_text()).lstrip("/")
(mine / "inner").mkdir()
(mine / "inner" / "cgroup.procs").write_text(str(os.getpid()))
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", sys.argv[1]])
Path("nested").write_text("yes")
time.sleep(60)
"""


def test_a_worker_that_nests_a_cgroup_is_still_killed_and_removed(
    cgroup_backend: ProcessBackend, workdir: Path, marker: str
) -> None:
    argv = [sys.executable, "-c", NESTS, marker]
    handle = cgroup_backend.start("w1", argv, env=dict(os.environ), cwd=workdir)
    until((workdir / "nested").exists, what="the worker to nest its cgroup")
    assert handle.cgroup is not None
    assert (handle.cgroup / "inner").is_dir()
    handle.signal(signal.SIGKILL)
    assert handle.wait(5) == -signal.SIGKILL
    cgroup_backend.close()
    assert marked(marker) == []
    assert not handle.cgroup.exists()
