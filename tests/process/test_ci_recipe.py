"""The GitHub Actions recipe (docs/ci/crashpoint.yml), run here step by step.

Its shell steps run as Actions runs them (``bash -eo pipefail``, ``$GITHUB_OUTPUT``,
``$GITHUB_STEP_SUMMARY``): three shard jobs, each in a directory of its own as on a runner
of its own, their uploads carried to the report job as artifacts are, then the merge and
the gate. The merged verdicts must be those of one unsharded ``crashpoint run`` with the
same seed, and the gate must exit as that run does. Only what needs GitHub (checkout,
setup-python, the pip install) is stood in for: ``crashpoint`` is this checkout's.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "docs" / "ci" / "crashpoint.yml"
#: A small slice of the reference matrix with a known bug, so the verdicts are mixed and
#: every one of the three shards gets cells.
ARGS = (
    "--target reference --mutant key_persisted_after_call "
    "--scenario crash_after_external_success --scenario crash_before_external_call "
    "--signal SIGKILL"
)
RUN_ID = "7"
STEP_TIMEOUT_S = 180
#: Actions' own steps the runner provides; nothing of the recipe's happens in them.
PROVIDED = ("actions/checkout@", "actions/setup-python@")
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


class Job:
    """One job of the workflow on a runner of its own: a directory and its outputs."""

    def __init__(self, spec: Mapping[str, Any], workdir: Path, env: Mapping[str, str]) -> None:
        self.spec = spec
        self.dir = workdir
        self.dir.mkdir(parents=True)
        self.env = dict(env)
        self.matrix: dict[str, str] = {}
        self.outputs: dict[str, dict[str, str]] = {}
        self.codes: dict[str, int] = {}
        self.failed = False
        self.summary = workdir / "step-summary.md"
        self.sarif: dict[str, Any] = {}

    def expand(self, text: str) -> str:
        """``${{ matrix.X }}`` and ``${{ steps.ID.outputs.X }}``; anything else would
        need GitHub, and fails the test rather than being guessed."""

        def one(m: re.Match[str]) -> str:
            parts = m.group(1).split(".")
            if parts[0] == "matrix" and len(parts) == 2:
                return self.matrix[parts[1]]
            if parts[0] == "steps" and len(parts) == 4 and parts[2] == "outputs":
                return self.outputs.get(parts[1], {}).get(parts[3], "")
            raise AssertionError(f"the recipe uses an expression this test cannot run: {m[0]}")

        return EXPRESSION.sub(one, text)

    def runs(self, step: Mapping[str, Any]) -> bool:
        condition = step.get("if")
        if condition is None:
            return not self.failed
        assert condition == "always()", f"unexpected condition {condition!r}"
        return True

    def step(self, step: Mapping[str, Any], artifacts: Path) -> None:
        if not self.runs(step):
            return
        uses = step.get("uses")
        if uses is not None:
            self.action(
                uses, {k: self.expand(str(v)) for k, v in step.get("with", {}).items()}, artifacts
            )
            return
        if step.get("id") == "install":
            assert "pip install" in step["run"]
            return  # crashpoint is this checkout's, on PATH
        step_id = step.get("id", step.get("name", "step"))
        out = self.dir / f".output-{step_id}"
        out.touch()
        env = {**self.env, **{k: self.expand(str(v)) for k, v in step.get("env", {}).items()}}
        env.update(GITHUB_OUTPUT=str(out), GITHUB_STEP_SUMMARY=str(self.summary))
        script = self.expand(step["run"])
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
            cwd=self.dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=STEP_TIMEOUT_S,
            check=False,
        )
        self.codes[step_id] = done.returncode
        lines = out.read_text().splitlines()
        self.outputs[step_id] = dict(line.split("=", 1) for line in lines if "=" in line)
        if done.returncode != 0:
            self.failed = True

    def action(self, uses: str, inputs: Mapping[str, str], artifacts: Path) -> None:
        if uses.startswith(PROVIDED):
            return
        if uses.startswith("actions/upload-artifact@"):
            store = artifacts / inputs["name"]
            for line in inputs["path"].splitlines():
                source = self.dir / line.strip()
                if line.strip() and source.exists():
                    target = store / line.strip()
                    target.parent.mkdir(parents=True, exist_ok=True)
                    copy = shutil.copytree if source.is_dir() else shutil.copy2
                    copy(source, target)
            return
        if uses.startswith("actions/download-artifact@"):
            # With a pattern, each artifact lands in a directory named after it, and the
            # files inside keep their paths relative to what was uploaded (its common root).
            for store in sorted(artifacts.iterdir()):
                if fnmatch.fnmatch(store.name, inputs["pattern"]):
                    files = [p for p in store.rglob("*") if p.is_file()]
                    common = Path(os.path.commonpath([str(p.parent) for p in files]))
                    for f in files:
                        target = self.dir / inputs["path"] / store.name / f.relative_to(common)
                        target.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(f, target)
            return
        if uses.startswith("github/codeql-action/upload-sarif@"):
            self.sarif = json.loads((self.dir / inputs["sarif_file"]).read_text())
            return
        raise AssertionError(f"the recipe uses an action this test does not stand in for: {uses}")


def crashpoint_on_path(bin_dir: Path) -> str:
    """A ``crashpoint`` command that is this interpreter's, with this checkout first."""
    bin_dir.mkdir()
    shim = bin_dir / "crashpoint"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m harness "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


def verdicts(path: Path) -> dict[str, str]:
    doc = json.loads(path.read_text())
    return {t["id"]: t["verdict"] for t in doc["trials"]}


def test_the_workflow_shards_merge_into_the_unsharded_verdicts(tmp_path: Path) -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    jobs = workflow["jobs"]
    shards = [str(s) for s in jobs["shard"]["strategy"]["matrix"]["shard"]]
    assert shards == ["1", "2", "3"]
    assert str(workflow["env"]["SHARDS"]) == "3"
    env = {
        **os.environ,
        **{k: str(v) for k, v in workflow["env"].items()},
        "CRASHPOINT_ARGS": ARGS,
        "GITHUB_RUN_ID": RUN_ID,
        "PATH": crashpoint_on_path(tmp_path / "bin"),
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()

    codes = {}
    for shard in shards:
        job = Job(jobs["shard"], tmp_path / f"runner-shard-{shard}", env)
        job.matrix["shard"] = shard
        for step in jobs["shard"]["steps"]:
            job.step(step, artifacts)
        assert job.codes["run"] == 0, "the run step records the exit code, it never fails"
        codes[shard] = int(job.outputs["run"]["code"])
        assert job.codes.get("shard-gate", 0) == codes[shard]
    assert set(codes.values()) == {0, 1}, codes  # some shards held all their cells
    assert sorted(p.name for p in artifacts.iterdir()) == [f"crashpoint-shard-{s}" for s in shards]

    report = Job(jobs["report"], tmp_path / "runner-report", env)
    for step in jobs["report"]["steps"]:
        report.step(step, artifacts)
    assert report.codes["merge"] == 0
    assert report.codes["gate"] == 1, "a violation in any shard fails the check with 1"
    merged = report.dir / "crashpoint-report"
    assert (merged / "index.html").is_file()
    assert report.summary.read_text() == (merged / "summary.md").read_text()
    # The merged violations went to code scanning, one result per violated cell.
    trials = json.loads((merged / "results.json").read_text())["trials"]
    violated = [t for t in trials if t["verdict"] == "violated"]
    assert len(report.sarif["runs"][0]["results"]) == len(violated) > 0

    whole = tmp_path / "unsharded"
    done = subprocess.run(
        ["crashpoint", "run", *ARGS.split(), "--seed", RUN_ID, "--out", str(whole)],
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == report.codes["gate"], done.stderr
    expected = verdicts(whole / "results.json")
    assert sorted(set(expected.values())) == ["held", "violated"]
    assert verdicts(merged / "results.json") == expected
