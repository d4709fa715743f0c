"""The example workers under the whole matrix, through the real CLI.

Each example's correct variant must hold every cell of its matrix (exit 0), at the
concurrency its crashpoint.toml declares; each buggy variant, run on the scenarios that
exercise its bug, must exit 1 naming the invariant its README says it breaks. Nothing the
runs started may outlive them.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from clikit import ROOT, leftovers, results, run
from test_examples_standalone import BULLMQ, NODE, RQ, Example, require

pytestmark = pytest.mark.process

MATRIX_TIMEOUT_S = 240

#: (example, buggy crashpoint.toml, the scenarios that exercise its bug, the invariant).
BUGGY = [
    (NODE, "crashpoint-buggy.toml", "crash_after_external_success", "no_duplicate_effect"),
    (
        RQ,
        "crashpoint-buggy-new-key-on-retry.toml",
        "crash_after_external_success",
        "no_duplicate_effect",
    ),
    (
        RQ,
        "crashpoint-buggy-close-without-effect.toml",
        "provider_error_before_commit",
        "nothing_lost",
    ),
    (RQ, "crashpoint-buggy-no-cap.toml", "provider_error_before_commit", "bounded_retries"),
    (
        BULLMQ,
        "crashpoint-buggy-new-key-on-retry.toml",
        "crash_after_external_success",
        "no_duplicate_effect",
    ),
]


def config(example: Example, name: str = "crashpoint.toml") -> str:
    return str((ROOT / "examples" / example.name / name).relative_to(ROOT))


@pytest.mark.parametrize("example", [NODE, RQ, BULLMQ], ids=lambda e: e.name)
def test_the_correct_variant_holds_the_whole_matrix(
    example: Example, scratch: Path, request: pytest.FixtureRequest
) -> None:
    require(request.config, example)
    out = scratch / "out"
    done = run(
        ["-c", config(example), "-j", "2", "--out", str(out)], scratch, timeout_s=MATRIX_TIMEOUT_S
    )
    doc = results(out)
    verdicts = Counter(t["verdict"] for t in doc["trials"])
    not_held = [
        (t["id"], t["verdict"], t.get("reason"), [v["invariant"] for v in t["violations"]])
        for t in doc["trials"]
        if t["verdict"] not in ("held", "skipped")
    ]
    assert not not_held, not_held
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert verdicts["held"] > 0
    # Every declared provider got cells, and every scenario ran for it.
    assert {t["provider_name"] for t in doc["trials"]} >= {"billing", "mailer"}
    assert leftovers(scratch) == []


@pytest.mark.parametrize(
    ("example", "variant", "scenario", "invariant"),
    BUGGY,
    ids=[f"{e.name}:{v.removesuffix('.toml')}" for e, v, _, _ in BUGGY],
)
def test_each_buggy_variant_is_caught_by_its_invariant(
    example: Example,
    variant: str,
    scenario: str,
    invariant: str,
    scratch: Path,
    request: pytest.FixtureRequest,
) -> None:
    require(request.config, example)
    out = scratch / "out"
    done = run(
        ["-c", config(example, variant), "-j", "2", "--scenario", scenario, "--out", str(out)],
        scratch,
    )
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    named = {v["invariant"] for t in results(out)["trials"] for v in t["violations"]}
    assert invariant in named, named
    assert leftovers(scratch) == []
