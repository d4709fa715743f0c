"""``crashpoint points`` never cuts the names ``--scenario`` and ``--point`` take, at any
width or in a pipe; ``--json`` is the table as data; the run summary keeps trial ids
whole."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from harness.cli import main
from harness.commands.console import print_summary
from harness.commands.points import POINTS_SCHEMA, points_command
from scenarios.table import SCENARIOS, Scenario, Step

ROOT = Path(__file__).resolve().parents[2]
NAMES = sorted({s.name for s in SCENARIOS} | {p for s in SCENARIOS for p in s.points})


def whole(name: str, text: str) -> bool:
    """``name`` appears in ``text`` as one unbroken word."""
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text) is not None


def rendered(width: int) -> str:
    out = io.StringIO()
    points_command(console=Console(file=out, width=width, color_system=None))
    return out.getvalue()


@pytest.mark.parametrize("width", [60, 80, 120])
def test_every_name_is_whole_at_any_width(width: int) -> None:
    text = rendered(width)
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    cut = [n for n in NAMES if not whole(n, text)]
    assert not cut, f"cut at {width} columns: {cut}\n{text}"


def test_narrow_and_wide_layouts_both_hold_every_name() -> None:
    # 80 columns still fits the table; 60 does not: both layouts are exercised above.
    assert "scenario / points" in rendered(80)
    assert "scenario / points" not in rendered(60)


@pytest.mark.process
@pytest.mark.parametrize("columns", [None, "60"])
def test_every_name_is_whole_through_a_pipe(columns: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if columns is not None:
        env["COLUMNS"] = columns
    done = subprocess.run(
        [sys.executable, "-m", "harness", "points"],
        stdout=subprocess.PIPE,  # not a terminal
        env=env,
        check=True,
        timeout=60,
    )
    text = done.stdout.decode()
    assert "\x1b[" not in text  # no colour codes into a pipe
    assert not [n for n in NAMES if not whole(n, text)], text


def test_json_round_trips_the_table() -> None:
    result = CliRunner().invoke(main, ["points", "--json"], terminal_width=60)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["schema"] == POINTS_SCHEMA
    back = [
        Scenario(
            **{k: tuple(v) if isinstance(v, list) else v for k, v in s.items() if k != "steps"},
            steps=tuple(Step(**step) for step in s["steps"]),
        )
        for s in doc["scenarios"]
    ]
    assert back == list(SCENARIOS)


LONG_ID = (
    "fresh_key_per_attempt.provider_down_during_reconcile.provider_hold_before_commit"
    ".unqueryable.SIGKILL.postgres.docker"
)


def run_doc(ids: list[str]) -> dict[str, Any]:
    trials = [
        {
            "id": i,
            "verdict": "violated" if n == 0 else "held",
            "violations": [{"invariant": "no_duplicate_effect"}] if n == 0 else [],
            "reason": None,
            "duration_s": 1.25,
        }
        for n, i in enumerate(ids)
    ]
    summary = {"total": len(ids), "held": len(ids) - 1, "violated": 1}
    summary |= {"inconclusive": 0, "skipped": 0}
    return {"command": "run", "seed": 7, "trials": trials, "summary": summary, "duration_s": 2.5}


@pytest.mark.parametrize("width", [60, 80, 200])
def test_the_run_summary_keeps_trial_ids_whole(width: int, tmp_path: Path) -> None:
    ids = [LONG_ID, "crash_before_external_call.before_external_call.plain.SIGTERM.sqlite.process"]
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None, soft_wrap=False)
    print_summary(run_doc(ids), tmp_path, to=console)
    text = out.getvalue()
    for trial_id in ids:
        assert whole(trial_id, text), text
    assert "no_duplicate_effect" in text
