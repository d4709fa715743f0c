"""A new user's first run, end to end: an empty directory, a ten-line worker,
``crashpoint init``, the placeholders replaced as its output says, then the commands it
printed, ending in a first report.

The tiny workers are correct for the first run's cells (``crash_before_external_call``
on an idempotent provider): each job leaves a durable record in CRASHPOINT_STATE_DIR
once its effect is confirmed, and its idempotency key comes from the job id alone, so
the worker that recovers after the kill sends the job once, under the same key.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.pytest_plugin import missing

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120

PYTHON_WORKER = """\
import json, os, pathlib, time, urllib.request
from failpoint import failpoint
JSON = "application/json"
state = pathlib.Path(os.environ["CRASHPOINT_STATE_DIR"])
url = os.environ["CRASHPOINT_PROVIDER_BILLING_URL"] + "/v1/effects"
while True:
    for job in sorted(state.glob("inbox/*.json")):
        doc, done = json.loads(job.read_text()), state / f"{job.stem}.done"
        if not done.exists():
            failpoint("before_external_call", doc["job_id"], 1)
            key = {"Idempotency-Key": "effect-" + doc["job_id"], "Content-Type": JSON}
            body = json.dumps(doc["body"]).encode()
            urllib.request.urlopen(urllib.request.Request(url, body, key)).read()
            done.write_text("ok")
    time.sleep(0.05)
"""

NODE_WORKER = """\
const fs = require('fs'), path = require('path');
const { failpoint } = require('./failpoint');
const state = process.env.CRASHPOINT_STATE_DIR, inbox = path.join(state, 'inbox');
const url = process.env.CRASHPOINT_PROVIDER_BILLING_URL + '/v1/effects', TYPE = 'application/json';
async function tick() {
  const files = fs.existsSync(inbox) ? fs.readdirSync(inbox).sort() : [];
  for (const job of files.filter((f) => f.endsWith('.json')).map((f) => require(`${inbox}/${f}`))) {
    const done = path.join(state, `${job.job_id}.done`);
    if (fs.existsSync(done)) continue;
    await failpoint('before_external_call', job.job_id, 1);
    const headers = { 'Idempotency-Key': `effect-${job.job_id}`, 'Content-Type': TYPE };
    const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(job.body) });
    if (res.ok) fs.writeFileSync(done, 'ok');
  }
  setTimeout(tick, 50);
}
tick();
"""

WORKERS = {"python": ("worker.py", PYTHON_WORKER), "node": ("worker.js", NODE_WORKER)}

#: The user's queue: a file per job in inbox/, written whole before it appears.
ENQUEUE = ["sh", "-c", 'mkdir -p inbox && cp "$1" inbox/$0.tmp && mv inbox/$0.tmp inbox/$0.json']


@pytest.fixture
def scratch() -> Iterator[Path]:
    """The runs' TMPDIR: trial directories land here (short, for the failpoint socket)."""
    path = Path(tempfile.mkdtemp(prefix="cpi-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def crashpoint(args: list[str], *, cwd: Path, scratch: Path) -> subprocess.CompletedProcess[str]:
    """This tree's ``crashpoint``, as the user types it."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["TMPDIR"] = str(scratch)
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def follow_placeholders(config: Path, printed: str) -> None:
    """Do what the printed instructions say: replace each <placeholder> of a key."""
    steps = re.findall(r"replace (<[^>]+>) in target\.(\w+)", " ".join(printed.split()))
    assert steps == [("<enqueue program>", "enqueue")], printed
    text = config.read_text()
    value = ", ".join(json.dumps(a) for a in ENQUEUE)
    assert text.count('"<enqueue program>"') == 1
    config.write_text(text.replace('"<enqueue program>"', value))


@pytest.mark.parametrize("lang", ["python", "node"])
def test_init_then_the_printed_commands_give_a_first_report(
    lang: str, tmp_path: Path, scratch: Path, pytestconfig: pytest.Config
) -> None:
    if lang == "node" and shutil.which("node") is None:
        missing(pytestconfig, "node (Node.js) for the Node.js first run")
    worker, source = WORKERS[lang]
    here = tmp_path / "my-worker"
    here.mkdir()
    (here / worker).write_text(source)

    init = crashpoint(["init", "--lang", lang], cwd=here, scratch=scratch)
    assert init.returncode == 0, init.stderr
    assert (here / "crashpoint.toml").is_file()
    assert (here / ("failpoint.py" if lang == "python" else "failpoint.js")).is_file()
    follow_placeholders(here / "crashpoint.toml", init.stdout)

    printed = [
        line.strip() for line in init.stdout.splitlines() if line.strip().startswith("crashpoint ")
    ]
    check, first = printed[0], printed[1]
    assert "check-config" in check, printed
    assert "--scenario" in first, printed

    checked = crashpoint(shlex.split(check)[1:], cwd=here, scratch=scratch)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "✓ the worker read CRASHPOINT_PROVIDER_BILLING_URL" in checked.stdout
    assert "✓ exactly one effect for j-0001" in checked.stdout
    assert "✗" not in checked.stdout

    ran = crashpoint(shlex.split(first)[1:], cwd=here, scratch=scratch)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = here / "crashpoint-out"
    assert (out / "index.html").is_file()
    doc = json.loads((out / "results.json").read_text())
    assert doc["trials"], doc
    assert {t["verdict"] for t in doc["trials"]} == {"held"}
    assert {t["scenario"] for t in doc["trials"]} == {"crash_before_external_call"}
    assert all(t["reached"] for t in doc["trials"])
    assert not list(scratch.iterdir()), "trial directories were left behind"
