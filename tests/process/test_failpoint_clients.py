"""The failpoint clients users copy (examples/failpoint-clients/), each driven by a tiny
worker in its own language against the harness's real :class:`Rendezvous`.

Node.js, Go, socat and a POSIX ``sh`` belong to the machines crashpoint is tested on, so a
missing one fails these tests rather than skipping them: a client nobody runs would rot.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.backends.process import ProcessBackend, ProcessHandle
from harness.history import History
from harness.rendezvous import Rendezvous

pytestmark = pytest.mark.process

CLIENTS = Path(__file__).resolve().parents[2] / "examples" / "failpoint-clients"
#: The boundaries each tiny worker passes, with the attempt it reports at each.
POINTS = [("after_claim", 1), ("before_external_call", 2), ("after_external_call", 2)]
#: ... then each announces the job's end (done, at attempt 2) with its client's one call.
EVERY = [*(p for p, _ in POINTS), "job_end"]
GO_BUILD_TIMEOUT_S = 300

NODE_WORKER = """\
'use strict';
const { failpoint, jobEnd } = require('./failpoint');
const job = process.argv[2];
(async () => {
  for (const [point, attempt] of %s) {
    await failpoint(point, job, attempt);
    console.log(point);
  }
  await jobEnd(job, 'done', 2);
  console.log('job_end');
})();
"""

GO_WORKER = """\
package main

import (
	"fmt"
	"os"

	"example.com/fpworker/failpoint"
)

func main() {
	job := os.Args[1]
	for _, p := range []struct {
		point   string
		attempt int
	}{%s} {
		failpoint.At(p.point, job, p.attempt)
		fmt.Println(p.point)
	}
	failpoint.JobEnd(job, "done", 2)
	fmt.Println("job_end")
}
"""

SH_WORKER = """\
. ./failpoint.sh
job=$1
%s
job_end "$job" done 2; echo job_end
"""


def need(program: str, why: str) -> str:
    found = shutil.which(program)
    if found is None:
        pytest.fail(f"{program} is not on PATH; it is needed for {why}", pytrace=False)
    assert found is not None
    return found


def node_worker(workdir: Path) -> list[str]:
    node = need("node", "the Node.js failpoint client")
    shutil.copy(CLIENTS / "failpoint.js", workdir)
    points = "[" + ", ".join(f"['{p}', {a}]" for p, a in POINTS) + "]"
    (workdir / "worker.js").write_text(NODE_WORKER % points)
    return [node, "worker.js"]


def go_worker(workdir: Path) -> list[str]:
    go = need("go", "the Go failpoint client")
    module = workdir / "gomod"
    (module / "failpoint").mkdir(parents=True)
    shutil.copy(CLIENTS / "failpoint.go", module / "failpoint")
    (module / "go.mod").write_text("module example.com/fpworker\n\ngo 1.21\n")
    points = ", ".join(f'{{"{p}", {a}}}' for p, a in POINTS)
    (module / "main.go").write_text(GO_WORKER % points)
    cache = os.environ.get("GOCACHE") or str(Path.home() / ".cache" / "crashpoint" / "go-build")
    env = {
        **os.environ,
        "GOCACHE": cache,
        "GOTOOLCHAIN": "local",  # never download a toolchain
        "GOPROXY": "off",  # the standard library only
        "GOFLAGS": "-buildvcs=false",
        "CGO_ENABLED": "0",
    }
    done = subprocess.run(
        [go, "build", "-o", str(workdir / "worker"), "."],
        cwd=module,
        env=env,
        capture_output=True,
        text=True,
        timeout=GO_BUILD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"go build failed:\n{done.stderr}"
    return [str(workdir / "worker")]


def sh_worker(workdir: Path, shell: str) -> list[str]:
    need("socat", "the shell failpoint client (bash scripts/install-infra.sh socat)")
    found = need(shell, "the shell failpoint client")
    shutil.copy(CLIENTS / "failpoint.sh", workdir)
    body = "\n".join(f'failpoint {p} "$job" {a}; echo {p}' for p, a in POINTS)
    (workdir / "worker.sh").write_text(SH_WORKER % body)
    return [found, "worker.sh"]


WORKERS: dict[str, Callable[[Path], list[str]]] = {
    "node": node_worker,
    "go": go_worker,
    "sh": lambda d: sh_worker(d, "sh"),
    "bash": lambda d: sh_worker(d, "bash"),
}


@pytest.fixture(params=sorted(WORKERS))
def lang(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Short, for the UNIX socket's 107-byte path limit.
    with tempfile.TemporaryDirectory(prefix="cpf-") as d:
        yield Path(d)


@pytest.fixture
def argv(lang: str, workdir: Path) -> list[str]:
    return WORKERS[lang](workdir)


@pytest.fixture
def history() -> History:
    return History()


@pytest.fixture
def rendezvous(workdir: Path, history: History) -> Iterator[Rendezvous]:
    with Rendezvous(workdir / "fp.sock", history=history) as rv:
        yield rv


@pytest.fixture
def backend(workdir: Path) -> Iterator[ProcessBackend]:
    # The workdir outlives the workers: they write there until the backend stops them.
    with ProcessBackend() as b:
        yield b


def start(
    backend: ProcessBackend,
    argv: list[str],
    workdir: Path,
    *,
    rendezvous: Rendezvous | None,
    worker_id: str,
) -> ProcessHandle:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRASHPOINT_")}
    env["CRASHPOINT_WORKER_ID"] = worker_id
    if rendezvous is not None:
        env.update(rendezvous.env)
    return backend.start(worker_id, [*argv, "j-0001"], env=env, cwd=workdir)


def printed(worker: ProcessHandle) -> list[str]:
    return worker.stdout_path.read_text().split()


def test_a_held_worker_reports_its_boundary_and_blocks_until_resumed(
    lang: str,
    argv: list[str],
    backend: ProcessBackend,
    rendezvous: Rendezvous,
    workdir: Path,
    history: History,
) -> None:
    gate = rendezvous.hold("before_external_call", job="j-0001")
    worker = start(backend, argv, workdir, rendezvous=rendezvous, worker_id=f"{lang}-1")
    hit = gate.wait(20)
    assert (hit.point, hit.job, hit.attempt, hit.pid) == (
        "before_external_call",
        "j-0001",
        2,
        worker.pid,
    )
    time.sleep(0.3)  # a client that did not wait for the reply would run past the hold
    assert worker.alive()
    assert printed(worker) == ["after_claim"]
    assert hit.resume()
    assert worker.wait(10) == 0, worker.stderr_path.read_text()
    assert printed(worker) == EVERY
    seen = [
        (e.source, e.fields["point"], e.attempt, e.fields["held"])
        for e in history.of_kind("failpoint")
    ]
    # The optional "worker" field names the lane: the worker's CRASHPOINT_WORKER_ID.
    steps = [*POINTS, ("job_end", 2)]
    assert seen == [(f"worker:{lang}-1", p, a, p == "before_external_call") for p, a in steps]
    # The job-end event carries its outcome, and is what the harness reads as the end.
    assert [h.outcome for h in rendezvous.hits() if h.point == "job_end"] == ["done"]
    assert [job for job, _ in rendezvous.job_ends()] == ["j-0001"]


def test_without_the_variable_a_failpoint_is_a_no_op(
    lang: str, argv: list[str], backend: ProcessBackend, rendezvous: Rendezvous, workdir: Path
) -> None:
    rendezvous.hold("after_claim")
    worker = start(backend, argv, workdir, rendezvous=None, worker_id=f"{lang}-2")
    assert worker.wait(10) == 0, worker.stderr_path.read_text()
    assert printed(worker) == EVERY
    assert rendezvous.hits() == []


def test_a_worker_killed_while_held_is_seen_to_disconnect(
    lang: str, argv: list[str], backend: ProcessBackend, rendezvous: Rendezvous, workdir: Path
) -> None:
    gate = rendezvous.hold("after_external_call")
    worker = start(backend, argv, workdir, rendezvous=rendezvous, worker_id=f"{lang}-3")
    hit = gate.wait(20)
    worker.signal(signal.SIGKILL)
    assert worker.wait(5) == -signal.SIGKILL
    assert hit.wait_disconnected(5), "the harness did not see the held worker die"
    assert printed(worker) == ["after_claim", "before_external_call"]


def test_a_worker_whose_harness_goes_away_carries_on(
    lang: str, argv: list[str], backend: ProcessBackend, workdir: Path
) -> None:
    rv = Rendezvous(workdir / "gone.sock")
    gate = rv.hold("after_claim")
    worker = start(backend, argv, workdir, rendezvous=rv, worker_id=f"{lang}-4")
    gate.wait(20)
    rv.close()
    # Failpoints are off from then on: the worker neither hangs nor dies.
    assert worker.wait(10) == 0, worker.stderr_path.read_text()
    assert printed(worker) == EVERY


#: The source each tiny worker calls its failpoints from (plain sh knows no caller line).
SOURCES = {"node": "worker.js", "go": "gomod/main.go", "bash": "worker.sh"}


def test_a_client_reports_the_file_and_line_it_was_called_from(
    lang: str,
    argv: list[str],
    backend: ProcessBackend,
    rendezvous: Rendezvous,
    workdir: Path,
    history: History,
) -> None:
    worker = start(backend, argv, workdir, rendezvous=rendezvous, worker_id=f"{lang}-5")
    assert worker.wait(20) == 0, worker.stderr_path.read_text()
    # The boundaries' lines; the job-end event after them is not a boundary.
    where = [
        (e.fields.get("file"), e.fields.get("line"))
        for e in history.of_kind("failpoint")
        if e.fields.get("point") != "job_end"
    ]
    if lang not in SOURCES:
        assert where == [(None, None)] * len(POINTS)
        return
    source = (workdir / SOURCES[lang]).resolve()
    calls = [
        n
        for n, text in enumerate(source.read_text().splitlines(), 1)
        if "failpoint(" in text or "failpoint.At(" in text or text.startswith("failpoint ")
    ]
    # One call site in a loop (node, go) or one line per point (bash).
    expected = calls * len(POINTS) if len(calls) == 1 else calls
    assert [(Path(f).name if f else None, n) for f, n in where] == [
        (source.name, n) for n in expected
    ]
    assert all(f is not None and Path(workdir, f).resolve() == source for f, _ in where)
