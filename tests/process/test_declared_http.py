"""A declared HTTP provider through the real CLI: examples/inhouse-api's unchanged client
(plain urllib to an in-house orders service, deduped on a body field, looked up by
``external_ref``) against the routes its crashpoint.toml declares.

The correct variant holds the cells that exercise create, replay, lookup and the faults
under --strict (its whole matrix runs in test_examples_matrix); the buggy variant, a new
request id per attempt, exits 1 naming no_duplicate_effect. check-config shows the routes
it understood.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clikit import ROOT, leftovers, results, run
from test_examples_standalone import INHOUSE, require

pytestmark = pytest.mark.process

HERE = ROOT / "examples" / INHOUSE.name
#: A crash after the create (lookup finds it), before it (lookup finds nothing), a reply
#: lost after the commit, a 503 before it, and a retry meeting its first in flight.
SCENARIOS = (
    "crash_after_external_success",
    "crash_before_external_call",
    "reset_after_commit",
    "provider_error_before_commit",
    "retry_while_in_flight",
)


def _args(name: str, out: Path, *scenarios: str) -> list[str]:
    config = str((HERE / name).relative_to(ROOT))
    chosen = [a for s in scenarios for a in ("--scenario", s)]
    return ["-c", config, "-j", "2", *chosen, "--out", str(out)]


def test_the_correct_variant_holds_its_cells(scratch: Path, request: pytest.FixtureRequest) -> None:
    require(request.config, INHOUSE)
    out = scratch / "out"
    done = run([*_args("crashpoint.toml", out, *SCENARIOS), "--strict"], scratch)
    doc = results(out)
    not_held = [
        (t["id"], t["verdict"], t.get("reason")) for t in doc["trials"] if t["verdict"] != "held"
    ]
    assert not not_held, not_held
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert {t["scenario"] for t in doc["trials"]} == set(SCENARIOS)
    # The client spoke the declared routes: its creates and its lookups at /orders, and
    # the lookups found the order after a crash past the create (200) and none before it.
    events = [e for t in doc["trials"] for e in t["events"] if e["source"].startswith("provider:")]
    writes = {
        (e["fields"]["method"], e["fields"]["path"]) for e in events if e["kind"] == "arrival"
    }
    assert writes == {("POST", "/orders")}, writes
    lookups = [e["fields"] for e in events if e["kind"] == "reconcile"]
    assert {(f["method"], f["path"].split("?")[0]) for f in lookups} == {("GET", "/orders")}
    assert {200, 404} <= {f["status"] for f in lookups}, lookups
    assert leftovers(scratch) == []


def test_the_fresh_key_variant_is_caught(scratch: Path, request: pytest.FixtureRequest) -> None:
    require(request.config, INHOUSE)
    out = scratch / "out"
    args = _args("crashpoint-buggy-fresh-key.toml", out, "crash_after_external_success")
    done = run(args, scratch)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    named = {v["invariant"] for t in results(out)["trials"] for v in t["violations"]}
    assert "no_duplicate_effect" in named, named
    assert leftovers(scratch) == []


def test_check_config_shows_the_routes(scratch: Path, request: pytest.FixtureRequest) -> None:
    require(request.config, INHOUSE)
    done = run(["-c", str(HERE / "crashpoint.toml")], scratch, command="check-config")
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert "routes of orders: create: POST /orders -> 201, key body $.meta.request_id" in said
    assert "lookup: GET /orders by query external_ref (the effect's key)" in said
    assert "orders (http over idempotent)" in said


def test_check_config_names_a_request_no_route_matches(
    scratch: Path, request: pytest.FixtureRequest
) -> None:
    require(request.config, INHOUSE)
    text = (HERE / "crashpoint.toml").read_text()
    text = text.replace('path = "/orders"\nkey', 'path = "/v2/orders"\nkey')
    # The copy lives elsewhere: the paths it names beside the example, made absolute.
    for name in ("../rq-worker/", "orderdesk"):
        text = text.replace(f'"{name}', f'"{HERE}/{name}')
    toml = scratch / "crashpoint.toml"
    toml.write_text(text)
    done = run(["-c", str(toml), "--timeout-s", "5"], scratch, command="check-config")
    # Something to fix before a run can say anything: check-config exits 2.
    assert done.returncode == 2, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert "the worker sent POST /orders, which matches no declared route (404)" in said
