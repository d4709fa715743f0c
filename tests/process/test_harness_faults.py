"""The harness's own faults, each with real processes and servers, each counting what is
left afterwards (processes and process groups carrying the run's marker, containers
carrying it, ports its processes listened on, temp dirs): a worker that hangs forever,
the output directory on a full filesystem, the Toxiproxy server killed mid-run, a
provider SIGKILLed mid-trial, PostgreSQL restarted mid-run."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from clikit import ROOT, cli
from leftovers import Leftovers, Marked

pytestmark = pytest.mark.process

RUN_TIMEOUT_S = 120


class Run:
    """``crashpoint run ARGS`` in a subprocess, marked, with its output read back."""

    def __init__(self, marked: Marked, args: list[str], **env: str) -> None:
        self.marked = marked
        self.proc = subprocess.Popen(
            [*cli(), "run", *args],
            cwd=ROOT,
            env=marked.env(**env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.stdout = self.stderr = ""

    def wait_for(self, what: str, found: Callable[[list[psutil.Process]], Any]) -> Any:
        """Poll the run's processes until ``found`` returns something truthy."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the run ended before {what}: {self.finish()}"
            hit = found(self.marked.sample())
            if hit:
                return hit
            time.sleep(0.05)
        pytest.fail(f"the run never got to {what}")

    def wait_for_descendant(self, what: str, found: Callable[[list[psutil.Process]], Any]) -> Any:
        """:meth:`wait_for` among the run's descendants only (no environment scan)."""
        me = psutil.Process(self.proc.pid)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the run ended before {what}: {self.finish()}"
            with contextlib.suppress(psutil.Error):
                hit = found(me.children(recursive=True))
                if hit:
                    return hit
            time.sleep(0.02)
        pytest.fail(f"the run never got to {what}")

    def finish(self) -> int:
        try:
            self.stdout, self.stderr = self.proc.communicate(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.stdout, self.stderr = self.proc.communicate()
            pytest.fail(f"the run did not end within {RUN_TIMEOUT_S} s")
        return self.proc.returncode

    def trials(self, out: Path) -> list[dict[str, Any]]:
        doc = json.loads((out / "results.json").read_text())
        trials: list[dict[str, Any]] = doc["trials"]
        return trials

    def errors(self) -> list[str]:
        """crashpoint's own one-line messages on stderr, and any traceback."""
        lines = self.stderr.splitlines()
        assert not any(line.startswith("Traceback") for line in lines), self.stderr
        return [line for line in lines if line.startswith("crashpoint:")]


@pytest.fixture
def marked(tmp_path: Path) -> Iterator[Marked]:
    m = Marked(tmp_path)
    try:
        yield m
    finally:
        m.kill_all()  # whatever a failed test leaves, it does not leave to the next one


def assert_nothing_left(marked: Marked, *, dirs: tuple[str, ...] = ()) -> None:
    left = marked.wait_clean(15.0)
    expected = Leftovers(dirs=sorted(dirs))
    assert left == expected, f"left behind: {left}"
    assert marked.seen_pids, "the run was never seen: the counts would prove nothing"


def of_cmd(word: str) -> Callable[[list[psutil.Process]], list[psutil.Process]]:
    def found(procs: list[psutil.Process]) -> list[psutil.Process]:
        out = []
        for p in procs:
            with contextlib.suppress(psutil.Error):
                if word in " ".join(p.cmdline()):
                    out.append(p)
        return out

    return found


def serving(word: str) -> Callable[[list[psutil.Process]], list[psutil.Process]]:
    """Processes whose command line holds ``word`` and that listen on a TCP port: a
    pool's providers share their fork server's command line, and only they listen."""
    matching = of_cmd(word)

    def found(procs: list[psutil.Process]) -> list[psutil.Process]:
        out = []
        for p in matching(procs):
            with contextlib.suppress(psutil.Error):
                if any(c.status == psutil.CONN_LISTEN for c in p.net_connections("tcp")):
                    out.append(p)
        return out

    return found


# -- a worker that hangs forever -----------------------------------------------------------

HANG = """
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.fork()  # parent and child hang alike, deaf to SIGTERM
while True:
    time.sleep(60)
"""

HANG_TOML = """
[target]
name = "hangs"
command = ["python3", "hang.py"]
workers = 1
lease_ttl_s = 0.6
enqueue = ["python3", "-c", "pass", "{job_id}", "{payload_file}"]

[[providers]]
name = "billing"
kind = "idempotent"
"""


def test_a_worker_that_hangs_forever_is_bounded_and_gone(marked: Marked, tmp_path: Path) -> None:
    work = tmp_path / "hangs"
    work.mkdir()
    (work / "hang.py").write_text(HANG)
    (work / "crashpoint.toml").write_text(HANG_TOML)
    out = tmp_path / "out"
    args = ["-c", str(work / "crashpoint.toml"), "--scenario", "crash_before_external_call"]
    run = Run(marked, [*args, "--signal", "SIGKILL", "--out", str(out), "--seed", "3"])
    hung = run.wait_for("the hanging worker", of_cmd("hang.py"))
    t0 = time.monotonic()
    assert run.finish() == 3, run.stderr
    assert time.monotonic() - t0 < 40, "bounded by the trial's wait for the boundary"
    (trial,) = run.trials(out)
    assert trial["verdict"] == "inconclusive"
    assert "before_external_call" in trial["reason"]
    assert "never reached" in trial["reason"]
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in hung)
    assert_nothing_left(marked)


# -- the output directory on a full filesystem ------------------------------------------


@pytest.fixture
def full_disk(tmp_path: Path, pytestconfig: pytest.Config) -> Iterator[Path]:
    """A 64 KiB tmpfs: results.json fits, the report beside it does not."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        from harness.pytest_plugin import missing

        missing(pytestconfig, f"a tmpfs mount (mount: {done.stderr.strip()})")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_output_disk_keeps_the_results_elsewhere(marked: Marked, full_disk: Path) -> None:
    out = full_disk / "out"
    cell = ["--scenario", "crash_before_external_call", "--point", "before_external_call"]
    cell += ["--provider", "idempotent", "--signal", "SIGKILL"]
    # Sampled once it is under way, not at its worker: one short trial can start and end
    # between two samples of the process table (seen in CI); the held trial in the kept
    # results is the proof that a worker ran.
    run = Run(marked, [*cell, "--out", str(out), "--seed", "5"])
    run.wait_for("the run's own process", lambda procs: procs)
    code = run.finish()
    (line,) = run.errors()
    assert "No space left on device" in line, line
    assert str(out) in line
    kept = Path(line.split(" kept them in ", 1)[1].split(" instead", 1)[0])
    assert code == 3, "the trials held, but their outputs are an infrastructure failure"
    assert kept.parent.parent == marked.tmp, "the fallback is a fresh temp dir"
    (trial,) = run.trials(kept.parent)
    assert trial["verdict"] == "held"
    assert (kept.parent / "index.html").is_file()
    assert_nothing_left(marked, dirs=(kept.parent.name,))


# -- the Toxiproxy server killed mid-run --------------------------------------------------

#: One trial at a time: the server dies under one trial, and the cells after it are what
#: show the restart (or the skip). At the default width every cell would be under way
#: when it died, and each of them rightly inconclusive.
NETWORK_CELLS = ["--scenario", "reset_after_commit", "--provider", "idempotent", "-j", "1"]


def assert_died_under(trials: list[dict[str, Any]]) -> None:
    """At most the trial the server died under is inconclusive, and it says so."""
    inconclusive = [t for t in trials if t["verdict"] == "inconclusive"]
    assert len(inconclusive) <= 1, [(t["id"], t["reason"]) for t in inconclusive]
    for t in inconclusive:
        assert t["reason"].startswith("the Toxiproxy server died mid-trial (killed by SIGKILL)"), t[
            "reason"
        ]


def test_toxiproxy_killed_mid_run_is_restarted(marked: Marked, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = Run(marked, [*NETWORK_CELLS, "--scenario", "ambiguous_timeout", "--out", str(out)])
    (server,) = run.wait_for("the Toxiproxy server", of_cmd("toxiproxy-server"))
    # The next network trial restarts the server, so the kill must land before the last
    # one: the first worker is looked for among the run's own descendants, a scan that
    # stays quick on a loaded machine where sampling every process can take seconds.
    run.wait_for_descendant("a trial's worker", of_cmd("scenarios.worker"))
    server.kill()
    code = run.finish()
    trials = run.trials(out)
    assert any("restarted it at" in line for line in run.errors()), run.stderr
    # The trial the server died under may end inconclusive, naming it; the rest run.
    verdicts = [t["verdict"] for t in trials]
    assert verdicts.count("held") >= len(trials) - 1, [(t["id"], t["reason"]) for t in trials]
    assert "skipped" not in verdicts
    assert_died_under(trials)
    assert code in (0, 3)
    assert_nothing_left(marked)


def test_toxiproxy_that_cannot_come_back_skips_the_rest(marked: Marked, tmp_path: Path) -> None:
    """The binary is gone as well as the server: the remaining cells are skipped with the
    reason, and the run ends as a run, not a crash."""
    from harness.network.discovery import find_toxiproxy

    binary = find_toxiproxy().binary
    assert binary is not None
    copy = tmp_path / "bin" / "toxiproxy-server"
    copy.parent.mkdir()
    shutil.copy2(binary, copy)
    out = tmp_path / "out"
    run = Run(
        marked,
        [*NETWORK_CELLS, "--scenario", "ambiguous_timeout", "--out", str(out)],
        TOXIPROXY_SERVER=str(copy),
        CRASHPOINT_NO_TOXIPROXY_BUILD="1",
    )
    (server,) = run.wait_for("the Toxiproxy server", of_cmd("toxiproxy-server"))
    # Among the run's own descendants, as above: sampling every process of a machine under
    # stress-ng took long enough for the whole run to end first (seen in CI).
    run.wait_for_descendant("a trial's worker", of_cmd("scenarios.worker"))
    copy.unlink()
    server.kill()
    code = run.finish()
    trials = run.trials(out)
    skipped = [t for t in trials if t["verdict"] == "skipped"]
    assert skipped, [(t["id"], t["verdict"], t["reason"]) for t in trials]
    for t in skipped:
        assert "Toxiproxy server died (killed by SIGKILL) and did not restart" in t["reason"]
    assert_died_under(trials)
    assert code in (0, 3)
    assert_nothing_left(marked)


# -- a provider SIGKILLed mid-trial ------------------------------------------------------


def _count(db_path: Path, query: str) -> int:
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as db:
            return int(db.execute(query).fetchone()[0])
    except sqlite3.Error:
        return 0  # not created yet, or mid-write: look again


ACKED = "SELECT count(*) FROM jobs WHERE delivery_state = 'acknowledged'"


def test_a_provider_killed_mid_trial_is_inconclusive_and_loses_nothing(
    marked: Marked, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    # A long lease: after the first effect the trial waits seconds for the lease to
    # expire, so the kill lands mid-trial however loaded the machine is.
    cell = ["--scenario", "crash_after_external_success", "--provider", "idempotent"]
    run = Run(marked, [*cell, "--signal", "SIGKILL", "--lease-ttl-s", "3", "--out", str(out)])
    (provider,) = run.wait_for("the provider", serving("-m fake_providers"))
    # The worker runs in the trial's directory, which holds the ledger (the provider's
    # state lives with the run's provider pool).
    worker, *_ = run.wait_for("the trial's worker", of_cmd("scenarios.worker"))
    ledger = Path(worker.cwd()) / "ledger.db"
    # The trial's second job runs free while the first is held: once the reference
    # worker's ledger acknowledges it, its effect is one the provider owes after a crash.
    run.wait_for("an acknowledged job", lambda _: _count(ledger, ACKED) > 0)
    provider.send_signal(signal.SIGKILL)
    assert run.finish() == 3, run.stderr
    (trial,) = run.trials(out)
    assert trial["verdict"] == "inconclusive", trial["reason"]
    assert trial["violations"] == []
    reason = trial["reason"]
    assert "provider svc (idempotent) died mid-trial (killed by SIGKILL)" in reason, reason
    assert "restarted on its log, which holds all" in reason, reason
    assert re.search(r"an effect for each of the [12] acknowledged jobs", reason), reason
    assert_nothing_left(marked)


# -- PostgreSQL restarted mid-run -------------------------------------------------------


@pytest.fixture
def private_pg(pytestconfig: pytest.Config) -> Iterator[Any]:
    """A PostgreSQL of this test's own: restarting it disturbs no other test's server."""
    from private_pg import pg_bin, private_postgres

    if pg_bin() is None:
        from harness.pytest_plugin import missing

        missing(pytestconfig, "PostgreSQL server binaries (/usr/lib/postgresql/*/bin)")
    with private_postgres() as server:
        yield server


def test_postgres_restarted_mid_run(marked: Marked, tmp_path: Path, private_pg: Any) -> None:
    out = tmp_path / "out"
    cells = ["--scenario", "crash_after_external_success", "--scenario", "duplicate_delivery"]
    cells += ["--provider", "idempotent", "--ledger", "postgres", "--lease-ttl-s", "2"]
    run = Run(marked, [*cells, "--out", str(out), "--seed", "4"], CRASHPOINT_PG_DSN=private_pg.dsn)
    run.wait_for("a trial's worker", of_cmd("scenarios.worker"))
    private_pg.restart()  # -m fast: every connection, the workers' and the harness's, is cut
    code = run.finish()
    trials = run.trials(out)
    why = [(t["id"], t["verdict"], t["reason"]) for t in trials]
    assert {t["verdict"] for t in trials} <= {"held", "inconclusive"}, why
    for t in trials:
        if t["verdict"] == "inconclusive":
            assert "PostgreSQL" in t["reason"], why
    assert code in (0, 3), run.stderr
    run.errors()  # no traceback
    assert_nothing_left(marked)


def test_the_ledger_watch_tells_a_restart_and_a_stop_from_a_server_that_stayed_up(
    private_pg: Any,
) -> None:
    from harness.ledger_server import LedgerServerWatch

    assert LedgerServerWatch(private_pg.dsn).failure() is None
    restarted = LedgerServerWatch(private_pg.dsn)
    private_pg.restart()
    assert (restarted.failure() or "").startswith("PostgreSQL restarted mid-trial"), restarted
    stopped = LedgerServerWatch(private_pg.dsn)
    private_pg.stop()
    assert (stopped.failure() or "").startswith("PostgreSQL stopped answering mid-trial")
    assert (LedgerServerWatch(private_pg.dsn).failure() or "").startswith(
        "PostgreSQL did not answer as the trial began"
    )
