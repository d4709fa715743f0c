"""Workers forked from the run's zygote (``[target.preload]``): each is the process
``python script.py`` would have started, the crash verdicts are the cold ones, a clock
cell starts cold, and a zygote that dies or refuses leaves cold starts, never a worker
nobody kills."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from clikit import ROOT, leftovers, results, run

from harness import faketime
from harness.backends.process import ProcessBackend
from harness.backends.zygote import Zygote
from harness.history import History

pytestmark = pytest.mark.process

# What a worker sees of itself, written where the test reads it.
SELF = """
import json, os, signal, sys
seen = {
    "argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0], "file": __file__,
    "name": __name__, "env": os.environ.get("ONLY_MINE"), "leaked": "ZYGOTE_ONLY" in os.environ,
    "session": os.getsid(0) == os.getpid(), "preloaded": "email.mime.text" in sys.modules,
    "sigint": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
    "sigchld": signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL,
    "fds": sorted(int(f) for f in os.listdir("/proc/self/fd")),
    "stdin": os.read(0, 10).decode(),
}
with open(os.environ["REPORT"], "w") as f:
    json.dump(seen, f)
print("to stdout"); print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "me.py").write_text(SELF)
    return tmp_path


@pytest.fixture
def zygote(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Zygote]:
    monkeypatch.setenv("ZYGOTE_ONLY", "1")  # in the zygote's environment, not the worker's
    log = workdir / "zlog" / "zygote.log"
    z = Zygote(sys.executable, ["email.mime.text"], cwd=workdir, log=log, watchdog=None)
    yield z
    z.close()


def _env(workdir: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ZYGOTE_ONLY"}
    return {**env, "ONLY_MINE": "yes", "REPORT": str(workdir / "seen.json"), **more}


def _cold_sigint_is_default() -> bool:
    """Whether a Python started cold from here gets Python's own SIGINT handler: not
    when SIGINT is ignored where this test runs (a shell's background job), since an
    ignored signal stays ignored across exec. A fork must see what a cold start would."""
    probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=30
    )
    return done.stdout.strip() == "True"


def _starts(history: History) -> list[tuple[str, str | None]]:
    out = []
    for e in history:
        if e.kind == "worker_start":
            out.append((str(e.fields["start"]), e.fields.get("cold_reason")))
    return out


def test_a_forked_worker_sees_its_own_environment_cwd_and_argv(
    workdir: Path, zygote: Zygote
) -> None:
    history = History()
    with ProcessBackend(history=history, zygote=zygote) as backend:
        argv = [sys.executable, "app/me.py", "3"]
        handle = backend.start("w1", argv, env=_env(workdir), cwd=workdir)
        assert handle.wait(10) == 3
    seen = json.loads((workdir / "seen.json").read_text())
    assert _starts(history) == [("preloaded", None)]
    assert seen == {
        "argv": [str(workdir / "app" / "me.py"), "3"],  # the script's path, made absolute
        "cwd": str(workdir),
        "path0": str(workdir / "app"),
        "file": str(workdir / "app" / "me.py"),
        "name": "__main__",
        "env": "yes",
        "leaked": False,
        "session": True,
        "preloaded": True,
        "sigint": _cold_sigint_is_default(),
        "sigchld": True,
        "fds": [0, 1, 2, 3],  # 3: the listing's own
        "stdin": "",
    }
    assert (workdir / "w1.stdout.log").read_text() == "to stdout\n"
    assert (workdir / "w1.stderr.log").read_text() == "to stderr\n"
    exits = [e.fields["returncode"] for e in history if e.kind == "worker_exit"]
    assert exits == [3]


def test_a_forked_worker_exits_as_python_would(workdir: Path, zygote: Zygote) -> None:
    (workdir / "app" / "boom.py").write_text("raise ValueError('boom')\n")
    (workdir / "app" / "says.py").write_text("import sys; sys.exit('bye')\n")
    with ProcessBackend(history=History(), zygote=zygote) as backend:
        env = _env(workdir)
        boom = backend.start("b", [sys.executable, "app/boom.py"], env=env, cwd=workdir)
        says = backend.start("s", [sys.executable, "app/says.py"], env=env, cwd=workdir)
        gone = backend.start("g", [sys.executable, "app/none.py"], env=env, cwd=workdir)
        mod = backend.start("m", [sys.executable, "-m", "json.tool", "--bad"], env=env, cwd=workdir)
        assert [h.wait(10) for h in (boom, says, gone, mod)] == [1, 1, 2, 2]
    assert "ValueError: boom" in (workdir / "b.stderr.log").read_text()
    assert (workdir / "s.stderr.log").read_text() == "bye\n"
    assert "can't open file" in (workdir / "g.stderr.log").read_text()
    assert "unrecognized arguments: --bad" in (workdir / "m.stderr.log").read_text()


def test_a_worker_left_by_a_dead_zygote_is_killed_and_later_starts_are_cold(
    workdir: Path, zygote: Zygote
) -> None:
    (workdir / "app" / "sleep.py").write_text("import time\ntime.sleep(60)\n")
    history = History()
    with ProcessBackend(history=history, zygote=zygote) as backend:
        env = _env(workdir)
        held = backend.start("w1", [sys.executable, "app/sleep.py"], env=env, cwd=workdir)
        assert zygote._proc is not None
        os.kill(zygote._proc.pid, signal.SIGKILL)
        assert held.wait(10) == -signal.SIGKILL
        assert not psutil.pid_exists(held.pid) or psutil.Process(held.pid).status() == "zombie"
        after = backend.start("w2", [sys.executable, "app/me.py", "0"], env=env, cwd=workdir)
        assert after.wait(10) == 0
    (first, _), (second, why) = _starts(history)
    assert (first, second) == ("preloaded", "cold")
    assert why is not None
    assert why.startswith("the zygote died (killed by SIGKILL)")
    notes = [e.fields.get("note", "") for e in history if e.kind == "worker_exit"]
    assert "the zygote died" in notes[0]


def test_preloaded_modules_that_leave_a_thread_running_are_refused(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = workdir / "lib"
    lib.mkdir()
    (lib / "spins.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True,"
        " name='spinner').start()\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(lib))
    log = workdir / "zlog" / "zygote.log"
    zygote = Zygote(sys.executable, ["spins"], cwd=workdir, log=log, watchdog=None)
    history = History()
    try:
        with ProcessBackend(history=history, zygote=zygote) as backend:
            env = {**_env(workdir), "PYTHONPATH": str(lib)}
            handle = backend.start("w1", [sys.executable, "app/me.py", "0"], env=env, cwd=workdir)
            assert handle.wait(10) == 0
    finally:
        zygote.close()
    [(start, why)] = _starts(history)
    assert start == "cold"
    assert why is not None
    assert "importing left threads running (spinner)" in why


# -- through the CLI ----------------------------------------------------------------------

PYQUEUE = ROOT / "tests" / "process" / "workers" / "pyqueue"


def _config(tmp_path: Path, *, preload: bool) -> Path:
    text = (PYQUEUE / "crashpoint.toml").read_text()
    for name in ("worker.py", "enqueue.py", "status.py", "cancel.py"):
        text = text.replace(f'"{name}"', f'"{PYQUEUE / name}"')
    if preload:
        text = text.replace(
            "\n[[providers]]", '\n[target.preload]\nmodules = ["sqlite3"]\n\n[[providers]]', 1
        )
    path = tmp_path / ("preloaded.toml" if preload else "cold.toml")
    path.write_text(text)
    return path


def _zygotes(scratch: Path) -> list[int]:
    out = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            if "zygote_server.py" in cmd and proc.environ().get("TMPDIR") == str(scratch):
                out.append(proc.pid)
        except psutil.Error:
            continue
    return out


def _run(tmp_path: Path, scratch: Path, args: list[str], *, preload: bool) -> list[dict[str, Any]]:
    out = tmp_path / ("out-preloaded" if preload else "out-cold")
    done = run(["-c", str(_config(tmp_path, preload=preload)), *args, "--out", str(out)], scratch)
    assert leftovers(scratch) == []
    assert _zygotes(scratch) == []
    trials: list[dict[str, Any]] = results(out)["trials"]
    assert trials, done.stderr[-2000:]
    return trials


def test_a_preloaded_worker_killed_at_its_failpoint_is_judged_as_a_cold_one(
    tmp_path: Path, scratch: Path
) -> None:
    args = ["--scenario", "crash_after_external_success", "--signal", "SIGKILL"]
    args += ["--provider", "billing", "--seed", "7"]
    verdicts = {}
    for preload in (False, True):
        trials = _run(tmp_path, scratch, args, preload=preload)
        verdicts[preload] = [(t["id"], t["verdict"], t["violations"]) for t in trials]
        for t in trials:
            starts = [e["fields"] for e in t["events"] if e["kind"] == "worker_start"]
            assert {s.get("start") for s in starts} == ({"preloaded"} if preload else {None})
            exits = [e["fields"] for e in t["events"] if e["kind"] == "worker_exit"]
            killed = [e for e in t["events"] if e["kind"] == "signal"]
            assert killed, t["id"]
            victim = killed[0]["fields"]["worker"]
            assert {"worker": victim, "returncode": -9} in [
                {"worker": x["worker"], "returncode": x["returncode"]} for x in exits
            ]
    assert verdicts[True] == verdicts[False]
    assert {v for _, v, _ in verdicts[True]} == {"held"}


def test_a_clock_cell_starts_its_skewed_worker_cold(tmp_path: Path, scratch: Path) -> None:
    if (why := faketime.unavailable()) is not None:
        pytest.skip(why)
    args = ["--scenario", "clock_skew", "--point", "worker_ahead", "--provider", "billing"]
    trials = _run(tmp_path, scratch, [*args, "--signal", "SIGSTOP", "--seed", "7"], preload=True)
    for t in trials:
        starts = [e["fields"] for e in t["events"] if e["kind"] == "worker_start"]
        cold = [s for s in starts if s["start"] == "cold"]
        assert cold, t["id"]
        # libfaketime's variables: loaded as the interpreter starts, never by a fork.
        assert all("LD_PRELOAD" in str(s["cold_reason"]) for s in cold)
        assert any(s["start"] == "preloaded" for s in starts), t["id"]
