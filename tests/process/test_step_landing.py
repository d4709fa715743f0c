"""A cell is reached at its own provider: a job that charges at billing, then mails at
mailer (tests/process/workers/pysteps, every job two calls) is stopped at mailer's
boundary in a mailer cell, not at billing's, which comes first.

The worker's failpoint lines name each call's step after its provider; crashpoint lets
go the hits at billing's boundaries and holds mailer's. A bug that writes a step whose
outcome is unknown again without a lookup is then caught in the mailer cells (a second
email at a plain provider), where a kill at billing's boundary missed it (billing
replays its key). A worker whose lines name steps crashpoint cannot place is told where
its kill landed, never that it was exact.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from clikit import ROOT, leftovers, results, run

pytestmark = pytest.mark.process

PYSTEPS = ROOT / "tests" / "process" / "workers" / "pysteps"
MAILER_CELLS = [
    ("crash_before_external_call", "before_external_call"),
    ("crash_after_external_success", "after_external_call"),
    ("lease_expiry_slow_worker", "after_external_call"),
]
#: The mailer cells a kill at mailer's boundary (and not at billing's) catches the bug in.
CATCHING = [
    ("crash_after_external_success", "after_external_call"),
    ("lease_expiry_slow_worker", "after_external_call"),
    ("provider_down_during_reconcile", "provider_lookup_503"),
]


def mailer_trials(
    toml: str, cells: list[tuple[str, str]], scratch: Path, out: Path
) -> list[dict[str, Any]]:
    args = ["-c", str(PYSTEPS / toml), "--provider", "mailer", "--signal", "SIGKILL"]
    args += ["--signal", "SIGSTOP", "--seed", "5", "-j", "2"]
    for scenario, point in cells:
        args += ["--scenario", scenario, "--point", point]
    done = run([*args, "--out", str(out)], scratch)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    (out / "stdout.txt").write_text(done.stdout + done.stderr)
    assert leftovers(scratch) == []
    # --scenario and --point select their product: keep the cells asked for.
    trials = [t for t in results(out)["trials"] if (t["scenario"], t["injection_point"]) in cells]
    assert sorted((t["scenario"], t["injection_point"]) for t in trials) == sorted(cells)
    return trials


def held_hits(trial: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [
        (e["fields"]["point"], e["fields"].get("step"))
        for e in trial["events"]
        if e["kind"] == "failpoint" and e["fields"]["held"]
    ]


def test_a_mailer_cell_is_held_at_mailers_boundary(scratch: Path, tmp_path: Path) -> None:
    trials = mailer_trials("crashpoint-billing-then-mailer.toml", MAILER_CELLS, scratch, tmp_path)
    for t in trials:
        assert t["verdict"] == "held", t["reason"]
        point = t["injection_point"]
        assert held_hits(t)[:1] == [(point, "mailer")], held_hits(t)
        assert t["exercised"] == f"{point} at mailer: reached at that boundary (failpoint: exact)"
        # Billing's boundary came first and was let go: the job charged before it mailed.
        passed = [
            e
            for e in t["events"]
            if e["kind"] == "failpoint" and e["fields"].get("step") == "billing"
        ]
        assert passed, held_hits(t)
        assert not any(e["fields"]["held"] for e in passed)


def test_a_step_written_again_blind_is_caught_in_the_mailer_cells(
    scratch: Path, tmp_path: Path
) -> None:
    correct = mailer_trials(
        "crashpoint-billing-then-mailer.toml", CATCHING, scratch, tmp_path / "correct"
    )
    assert [t["verdict"] for t in correct] == ["held"] * len(CATCHING)
    buggy = mailer_trials(
        "crashpoint-billing-then-mailer-buggy.toml", CATCHING, scratch, tmp_path / "buggy"
    )
    for t in buggy:
        assert t["verdict"] == "violated", t["id"]
        assert "no_duplicate_effect" in {v["invariant"] for v in t["violations"]}, t["id"]
        mails = [
            e for e in t["events"] if e["kind"] == "commit" and e["source"] == "provider:mailer"
        ]
        assert len([e for e in mails if e["job"] == "j-0001"]) == 2


def test_a_kill_at_a_step_crashpoint_cannot_place_says_where_it_landed(
    scratch: Path, tmp_path: Path
) -> None:
    cells = MAILER_CELLS[:2]
    trials = mailer_trials("crashpoint-unnamed-steps.toml", cells, scratch, tmp_path)
    said = {t["injection_point"]: t["exercised"] for t in trials}
    # The response in hand followed billing's write: that is where the kill landed.
    assert said["after_external_call"].startswith("reached at billing, not mailer"), said
    # Before a call nothing tells which one comes: the report says it may be billing's.
    before = said["before_external_call"]
    assert "may have landed there, not at mailer" in before, said
    assert '"provider"' in before
    assert not any("exact" in s for s in said.values()), said
    page = next((tmp_path / "trials").glob("crash_after_external_success*.html")).read_text()
    assert "reached at billing, not mailer" in page
    assert "failpoint: exact" not in page
    # The terminal names them too.
    said_there = " ".join((tmp_path / "stdout.txt").read_text().split())
    assert "2 cell(s) did not exercise what they name:" in said_there
    assert "reached at billing, not mailer" in said_there
