"""Without a Toxiproxy server the network cells are skipped with the reason, never passed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process


def crashpoint(args: list[str], *, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOXIPROXY_")}
    env["CRASHPOINT_CACHE"] = str(cache)  # an empty cache: no built binary to find
    env["CRASHPOINT_NO_TOXIPROXY_BUILD"] = "1"  # and no building one either
    env["PATH"] = os.pathsep.join(
        p
        for p in env.get("PATH", "").split(os.pathsep)
        if not shutil.which("toxiproxy-server", path=p)
    )
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_hidden_toxiproxy_skips_network_cells_and_strict_fails(tmp_path: Path) -> None:
    args = ["run", "--scenario", "reset_after_commit", "--scenario", "crash_after_external_success"]
    args += ["--provider", "plain", "--signal", "SIGKILL", "--seed", "3"]
    lenient = crashpoint([*args, "--out", str(tmp_path / "a")], cache=tmp_path / "cache")
    assert lenient.returncode == 0, lenient.stderr
    trials = json.loads((tmp_path / "a" / "results.json").read_text())["trials"]
    by_scenario = {t["scenario"]: t for t in trials}
    network = by_scenario["reset_after_commit"]
    assert network["verdict"] == "skipped"
    assert "Toxiproxy" in network["reason"]
    assert "install" in network["reason"] or "go install" in network["reason"]
    assert by_scenario["crash_after_external_success"]["verdict"] == "held"

    strict = crashpoint([*args, "--strict", "--out", str(tmp_path / "b")], cache=tmp_path / "cache")
    assert strict.returncode == 3, strict.stderr


def test_ci_true_makes_a_run_strict_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["run", "--scenario", "reset_after_commit", "--scenario", "crash_after_external_success"]
    args += ["--provider", "plain", "--signal", "SIGKILL", "--seed", "3"]
    monkeypatch.setenv("CI", "true")
    strict = crashpoint([*args, "--out", str(tmp_path / "a")], cache=tmp_path / "cache")
    assert strict.returncode == 3, strict.stderr
    lenient = crashpoint([*args, "--no-strict", "--out", str(tmp_path / "b")], cache=tmp_path / "c")
    assert lenient.returncode == 0, lenient.stderr


def test_a_run_whose_every_cell_was_skipped_is_no_pass(tmp_path: Path) -> None:
    # It used to exit 0 without --strict: a gate that had tested nothing passed.
    args = ["run", "--scenario", "reset_after_commit", "--provider", "plain", "--seed", "3"]
    done = crashpoint([*args, "--out", str(tmp_path / "a")], cache=tmp_path / "cache")
    assert done.returncode == 3, done.stderr
    trials = json.loads((tmp_path / "a" / "results.json").read_text())["trials"]
    assert trials
    assert {t["verdict"] for t in trials} == {"skipped"}


def test_a_build_says_what_it_is_doing_while_it_runs(tmp_path: Path) -> None:
    # A fake `go` that takes its time and talks as `go install` does; the build must
    # report before it ends (a first run printed one line, then two silent minutes).
    from harness.network import discovery

    go = tmp_path / "bin" / "go"
    go.parent.mkdir()
    go.write_text(
        "#!/bin/sh\necho 'go: downloading github.com/Shopify/toxiproxy/v2 v2.12.0' >&2\n"
        'sleep 0.3\nmkdir -p "$GOBIN" && printf "#!/bin/sh\\n" > "$GOBIN/server"\n'
    )
    go.chmod(0o755)
    said: list[str] = []
    dest = tmp_path / "cache" / "toxiproxy-server"
    old = discovery.PROGRESS_EVERY_S
    discovery.PROGRESS_EVERY_S = 0.1
    try:
        built = discovery.build_toxiproxy(dest, go=str(go), env={}, progress=said.append)
    finally:
        discovery.PROGRESS_EVERY_S = old
    assert built == dest
    assert dest.is_file()
    assert "1-2 minutes" in said[0]
    assert any("go: downloading github.com/Shopify/toxiproxy" in line for line in said[1:])
