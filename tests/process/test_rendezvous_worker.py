"""Failpoint rendezvous against real worker processes using harness/failpoints.py."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.backends.process import ProcessBackend, ProcessHandle
from harness.contract.errors import RendezvousTimeout
from harness.history import History
from harness.rendezvous import Rendezvous

pytestmark = pytest.mark.process

# Passes three standard boundaries for one job, printing each one it got past.
WORKER = """
import sys
from harness.contract.failpoint import failpoint
job = sys.argv[1]
for point in ("after_claim", "before_external_call", "after_external_call"):
    failpoint(point, job, 1)
    print(point, flush=True)
"""


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="cp-") as d:
        yield Path(d)


@pytest.fixture
def history() -> History:
    return History()


@pytest.fixture
def rendezvous(workdir: Path, history: History) -> Iterator[Rendezvous]:
    with Rendezvous(workdir / "fp.sock", history=history) as rv:
        yield rv


@pytest.fixture
def backend() -> Iterator[ProcessBackend]:
    with ProcessBackend() as b:
        yield b


def _start(
    backend: ProcessBackend, rv: Rendezvous, workdir: Path, job: str, name: str = "w"
) -> ProcessHandle:
    # Written once and whole: rewriting it while an earlier worker's interpreter reads it
    # gave that worker a truncated (empty) script, which exits without a failpoint.
    script = workdir / "worker.py"
    if not script.exists():
        partial = workdir / "worker.py.partial"
        partial.write_text(WORKER)
        partial.rename(script)
    env = {**os.environ, **rv.env}
    return backend.start(name, [sys.executable, "worker.py", job], env=env, cwd=workdir)


def test_held_worker_blocks_until_resumed(
    backend: ProcessBackend, rendezvous: Rendezvous, workdir: Path, history: History
) -> None:
    gate = rendezvous.hold("before_external_call", job="j-0001")
    worker = _start(backend, rendezvous, workdir, "j-0001")
    hit = gate.wait(10)
    assert (hit.point, hit.job, hit.attempt, hit.pid) == (
        "before_external_call",
        "j-0001",
        1,
        worker.pid,
    )
    time.sleep(0.3)  # give a worker that ignored the hold time to run past it
    assert worker.alive()
    assert worker.stdout_path.read_text() == "after_claim\n"
    assert hit.peer_pid == worker.pid
    assert hit.resume()
    assert worker.wait(10) == 0
    assert worker.stdout_path.read_text().split() == [
        "after_claim",
        "before_external_call",
        "after_external_call",
    ]
    events = [(e.source, e.fields["point"], e.fields["held"]) for e in history.of_kind("failpoint")]
    source = f"worker:{worker.pid}"
    assert events == [
        (source, "after_claim", False),
        (source, "before_external_call", True),
        (source, "after_external_call", False),
    ]


def test_kill_while_held_is_observed(
    backend: ProcessBackend, rendezvous: Rendezvous, workdir: Path, history: History
) -> None:
    gate = rendezvous.hold("after_external_call")
    worker = _start(backend, rendezvous, workdir, "j-0002")
    hit = gate.wait(10)
    worker.signal(signal.SIGKILL)
    assert worker.wait(5) == -signal.SIGKILL
    assert hit.wait_disconnected(5), "the server did not notice the held worker die"
    assert not hit.resume(), "resuming a dead worker must report that nobody was there"
    assert worker.stdout_path.read_text().split() == ["after_claim", "before_external_call"]
    notes = [e.fields["text"] for e in history.of_kind("note")]
    assert notes == ["worker disconnected while held at after_external_call"]
    # The server survived: a new worker is still served.
    second = _start(backend, rendezvous, workdir, "j-0003", name="w2")
    assert second.wait(10) == 0


def test_unarmed_hits_continue_at_once(
    backend: ProcessBackend, rendezvous: Rendezvous, workdir: Path
) -> None:
    rendezvous.hold("before_external_call", job="some-other-job")
    worker = _start(backend, rendezvous, workdir, "j-0004")
    assert worker.wait(10) == 0
    assert [(h.point, h.held) for h in rendezvous.hits()] == [
        ("after_claim", False),
        ("before_external_call", False),
        ("after_external_call", False),
    ]


def test_many_workers_held_at_once(
    backend: ProcessBackend, rendezvous: Rendezvous, workdir: Path
) -> None:
    gate = rendezvous.hold("before_external_call", times=6)
    workers = [_start(backend, rendezvous, workdir, f"j-{i:04d}", name=f"w{i}") for i in range(6)]
    hits = [gate.wait(10) for _ in workers]
    assert {h.pid for h in hits} == {w.pid for w in workers}
    assert all(w.alive() for w in workers)
    for h in hits:
        h.resume()
    assert [w.wait(10) for w in workers] == [0] * 6


def test_wait_times_out_naming_the_point(rendezvous: Rendezvous) -> None:
    gate = rendezvous.hold("after_local_write", job="j-0009")
    with pytest.raises(RendezvousTimeout, match=r"'after_local_write'.*j-0009"):
        gate.wait(0.05)


def test_close_releases_held_workers_and_removes_the_socket(
    backend: ProcessBackend, workdir: Path
) -> None:
    rv = Rendezvous(workdir / "fp2.sock")
    gate = rv.hold("after_claim")
    worker = _start(backend, rv, workdir, "j-0010")
    gate.wait(10)
    rv.close()
    assert not (workdir / "fp2.sock").exists()
    # The worker's next failpoint call finds the socket closed; what it does then is the
    # client's business (harness/failpoints.py); here it only must not hang.
    assert worker.wait(10) is not None, "a worker whose harness went away must not hang"


def test_a_job_end_event_is_heard_with_its_outcome(
    backend: ProcessBackend, rendezvous: Rendezvous, workdir: Path
) -> None:
    # One known outcome, one the protocol does not have (heard as a hit, never an end).
    script = (
        "from harness.failpoints import job_end\n"
        "job_end('j-0001', 'done', 2)\n"
        "job_end('j-0002', 'finished')\n"
        "print('ended', flush=True)\n"
    )
    env = {**os.environ, **rendezvous.env}
    worker = backend.start("w", [sys.executable, "-c", script], env=env, cwd=workdir)
    assert worker.wait(10) == 0, worker.stderr_path.read_text()
    assert [job for job, _ in rendezvous.job_ends()] == ["j-0001"]
    hits = [(h.point, h.job, h.attempt, h.outcome) for h in rendezvous.hits()]
    assert hits == [("job_end", "j-0001", 2, "done"), ("job_end", "j-0002", None, "finished")]


# Two jobs, one after the other, as a worker whose first call got no answer runs them:
# the first looks its write up and ends without passing after_external_call.
TWO_JOBS = """
from harness.contract.failpoint import failpoint, job_end
for job, points in (("j-0001", ("after_claim", "before_external_call", "before_reconcile")),
                    ("j-0002", ("after_claim", "before_external_call", "after_external_call"))):
    for point in points:
        failpoint(point, job, 1)
    job_end(job, "done", 1)
"""


def test_a_hold_moves_to_the_next_job_when_its_job_ends_without_reaching_it(
    backend: ProcessBackend, rendezvous: Rendezvous, workdir: Path, history: History
) -> None:
    gate = rendezvous.hold("after_external_call", job="j-0001", then=["j-0002"])
    script = workdir / "two_jobs.py"
    script.write_text(TWO_JOBS)
    env = {**os.environ, **rendezvous.env}
    worker = backend.start("w", [sys.executable, "two_jobs.py"], env=env, cwd=workdir)
    hit = gate.wait(10)
    assert (hit.point, hit.job) == ("after_external_call", "j-0002")
    assert hit.resume()
    assert worker.wait(10) == 0
    notes = [e.fields["text"] for e in history.of_kind("note")]
    assert notes == [
        "j-0001 ended without reaching after_external_call: the hold there aims at j-0002 now"
    ]


def test_a_hold_with_no_next_job_stays_on_its_own(
    backend: ProcessBackend, rendezvous: Rendezvous, workdir: Path
) -> None:
    gate = rendezvous.hold("after_external_call", job="j-0001")
    script = workdir / "two_jobs.py"
    script.write_text(TWO_JOBS)
    env = {**os.environ, **rendezvous.env}
    worker = backend.start("w", [sys.executable, "two_jobs.py"], env=env, cwd=workdir)
    assert worker.wait(10) == 0
    with pytest.raises(RendezvousTimeout):
        gate.wait(0)
