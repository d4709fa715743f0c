"""``crashpoint recheck``: stored histories judged again by today's oracle, nothing rerun."""

from __future__ import annotations

import json
from pathlib import Path

from harness.commands.console import console
from harness.contract.errors import ConfigError
from harness.recheck import rejudge_document
from harness.results import exit_code


def recheck_command(path: Path, *, out: Path | None) -> int:
    try:
        doc = json.loads(path.read_text())
        trials = doc["trials"]
        if not isinstance(trials, list):
            raise TypeError("trials is not a list")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a crashpoint results.json ({exc})") from None
    new_doc, changes = rejudge_document(doc)
    console.print(f"rechecked {len(trials)} trials of {path} with today's oracle", markup=False)
    for change in changes:
        console.print(f"  {change.describe()}", markup=False, highlight=False)
    if not changes:
        console.print("  no verdict changes")
    rebuilt = sum(1 for t in new_doc["trials"] if t["recheck"].get("facts") == "rebuilt")
    if rebuilt:
        console.print(
            f"  {rebuilt} trial(s) were stored without their facts (an older results.json): "
            "rebuilt from the events, without job outcomes"
        )
    unreadable = [t for t in new_doc["trials"] if t["recheck"].get("note", "").startswith("cannot")]
    for t in unreadable[:5]:
        console.print(f"  {t['id']}: {t['recheck']['note']}", markup=False, highlight=False)
    if len(unreadable) > 5:
        console.print(f"  ... and {len(unreadable) - 5} more that cannot be judged again")
    if out is not None:
        from reports import write_run

        write_run(new_doc, out)
        console.print(f"report: {out / 'index.html'}", markup=False)
    return int(exit_code(new_doc["summary"], strict=False))
