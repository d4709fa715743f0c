"""A bundle made from a violated run of a buggy example replays, from a copy in another
directory, with the same verdict; a changed bundle is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from clikit import leftovers, run
from test_sarif import violated_run

pytestmark = pytest.mark.process


def test_a_bundle_of_a_violated_trial_replays_from_elsewhere(
    scratch: Path, request: pytest.FixtureRequest
) -> None:
    out = violated_run(scratch, request)
    made = scratch / "made" / "finding.bundle.json"
    done = run([str(out / "results.json"), "--out", str(made)], scratch, command="bundle")
    assert done.returncode == 0, done.stderr
    copy = scratch / "elsewhere" / "copy.json"
    copy.parent.mkdir()
    shutil.copy(made, copy)
    shutil.rmtree(out)  # nothing of the run is left but the bundle

    done = run([str(copy), "--out", str(scratch / "replayed")], scratch, command="replay")
    said = done.stdout + done.stderr
    assert done.returncode == 1, said[-3000:]
    assert "content hash checked" in said
    assert "reproduced: violated (was violated)" in said
    assert leftovers(scratch) == []

    doc = json.loads(copy.read_text())
    doc["content"]["trial"]["verdict"] = "held"
    copy.write_text(json.dumps(doc))
    done = run([str(copy), "--out", str(scratch / "no")], scratch, command="replay")
    assert done.returncode == 2
    assert "changed after it was made" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (scratch / "no").exists()
