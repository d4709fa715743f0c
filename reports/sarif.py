"""``sarif.json``: the violated cells as SARIF 2.1.0, for a code-scanning view.

One result per violated cell (a cell run under several seeds gives one), its rule the
first invariant it broke, located where the worker reached the cell's boundary: the file
and line its failpoint client sent (docs/failpoints.md). A cell with no such line (a
provider hold, a client that sends none) is located at the ``[target]`` line of the
configuration file, or at line 1 of it. Paths under the directory the report is written
from are relative to ``%SRCROOT%``, as code scanning wants them. Validated in tests
against the SARIF 2.1.0 schema (tests/fixtures/sarif/).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from harness.contract.vocabulary import INVARIANTS, VERSION, Verdict
from reports.model import Results, Target, TrialRow
from reports.sarif_rules import UNNAMED, rule_text

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SRCROOT = "%SRCROOT%"


def sarif_log(results: Results, root: Path | None = None) -> dict[str, Any]:
    """The SARIF document of ``results``; paths under ``root`` (default: here) relative."""
    base = (root or Path.cwd()).resolve()
    cells = _violated_cells(results.trials)
    named = [_invariant(t) for t in cells]
    rule_ids = [*INVARIANTS, *sorted({i for i in named if i not in INVARIANTS})]
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "crashpoint",
                "version": VERSION,
                "rules": [_rule(r) for r in rule_ids],
            }
        },
        "originalUriBaseIds": {SRCROOT: {"uri": base.as_uri() + "/"}},
        "results": [
            _result(t, rule_ids.index(i), results.target, base)
            for t, i in zip(cells, named, strict=True)
        ],
        "automationDetails": {"id": f"crashpoint/{results.target.name}/{results.run_id}"},
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def write_sarif(results: Results, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(sarif_log(results), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def _violated_cells(trials: tuple[TrialRow, ...]) -> list[TrialRow]:
    """The first violated trial of each cell, in the run's order."""
    seen: dict[tuple[str, str], TrialRow] = {}
    for trial in trials:
        if trial.verdict == Verdict.VIOLATED:
            seen.setdefault((trial.scenario, trial.id), trial)
    return list(seen.values())


def _invariant(trial: TrialRow) -> str:
    return trial.violations[0].invariant if trial.violations else UNNAMED


def _rule(invariant: str) -> dict[str, Any]:
    short, advice = rule_text(invariant)
    return {
        "id": invariant,
        "name": "".join(part.title() for part in invariant.split("_")),
        "shortDescription": {"text": short},
        "fullDescription": {"text": f"{short} Recovery: {advice}"},
        "help": {"text": advice, "markdown": f"**{short}**\n\nRecovery: {advice}"},
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": ["reliability", "crash-consistency"]},
    }


def _result(trial: TrialRow, rule_index: int, target: Target, base: Path) -> dict[str, Any]:
    lines = [
        f"{v.invariant}: {v.message}" if v.message else v.invariant for v in trial.violations
    ] or [trial.reason or "violated"]
    text = f"{trial.scenario} at {trial.injection_point}: " + "; ".join(lines)
    out: dict[str, Any] = {
        "ruleId": _invariant(trial),
        "ruleIndex": rule_index,
        "level": "error",
        "message": {"text": f"{text}. Replay: {trial.replay}"},
        "partialFingerprints": {"crashpointCell/v1": trial.id},
        "properties": {
            "scenario": trial.scenario,
            "cell": trial.id,
            "seed": trial.seed,
            "invariants": [v.invariant for v in trial.violations],
            "replay": trial.replay,
        },
    }
    where = _failpoint_site(trial) or _config_site(target)
    if where is not None:
        out["locations"] = [_location(*where, base)]
    return out


def _failpoint_site(trial: TrialRow) -> tuple[str, int] | None:
    """Where the worker called the cell's failpoint: a held hit (the one the fault
    struck) before any other hit of the same point."""
    hits = [
        e
        for e in trial.events
        if e.kind == "failpoint"
        and e.fields.get("point") == trial.injection_point
        and isinstance(e.fields.get("file"), str)
    ]
    hits.sort(key=lambda e: not e.fields.get("held"))
    for e in hits:
        line = e.fields.get("line")
        return str(e.fields["file"]), line if isinstance(line, int) and line > 0 else 1
    return None


def _config_site(target: Target) -> tuple[str, int] | None:
    config = target.extra.get("config")
    if not isinstance(config, str):
        return None
    line = target.extra.get("config_line")
    return config, line if isinstance(line, int) and line > 0 else 1


def _location(file: str, line: int, base: Path) -> dict[str, Any]:
    path = Path(file)
    resolved = (path if path.is_absolute() else base / path).resolve()
    if resolved.is_relative_to(base):
        artifact = {"uri": resolved.relative_to(base).as_posix(), "uriBaseId": SRCROOT}
    else:
        artifact = {"uri": resolved.as_uri()}
    return {"physicalLocation": {"artifactLocation": artifact, "region": {"startLine": line}}}
