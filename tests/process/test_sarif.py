"""sarif.json from a real violated run: valid SARIF 2.1.0, located at the line of the
example worker's own source where its failpoint client was called."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from clikit import ROOT, run
from test_examples_standalone import NODE, require

pytestmark = pytest.mark.process

SCHEMA = ROOT / "tests" / "fixtures" / "sarif" / "sarif-schema-2.1.0.json"
WORKER = ROOT / "examples" / "node-worker" / "worker.js"


def violated_run(scratch: Path, request: pytest.FixtureRequest) -> Path:
    """One cell of the buggy Node example, violated; its output directory."""
    require(request.config, NODE)
    out = scratch / "out"
    done = run(
        [
            *("-c", "examples/node-worker/crashpoint-buggy.toml"),
            *("--scenario", "crash_after_external_success", "--point", "after_external_call"),
            *("--provider", "billing", "--signal", "SIGKILL", "--out", str(out)),
        ],
        scratch,
    )
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    return out


def test_a_violated_run_points_at_the_failpoint_line_of_the_worker(
    scratch: Path, request: pytest.FixtureRequest
) -> None:
    out = violated_run(scratch, request)
    doc = json.loads((out / "sarif.json").read_text())
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text())).validate(doc)
    (result,) = doc["runs"][0]["results"]
    assert result["ruleId"] == "no_duplicate_effect"
    line = next(
        n
        for n, text in enumerate(WORKER.read_text().splitlines(), 1)
        if "await failpoint('after_external_call'" in text
    )
    assert result["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "examples/node-worker/worker.js", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": line},
    }
    assert doc["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == ROOT.as_uri() + "/"
