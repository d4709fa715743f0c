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
from clikit import MATRIX_JOBS, ROOT, leftovers, results, run
from test_examples_standalone import (
    AGENT_SDK,
    BULLMQ,
    INHOUSE,
    MCP,
    NODE,
    NODE_SDK,
    RQ,
    SMTP_NODE,
    Example,
    require,
)

pytestmark = pytest.mark.process

MATRIX_TIMEOUT_S = 240
#: The MCP agent's matrix is as long as the others' (42 cells), but every trial loads the
#: MCP SDK in two providers and in each worker it starts (most of a second each on a
#: quiet machine, several under load): its trials take about twice as long.
MCP_MATRIX_TIMEOUT_S = 480
#: The SDK examples: the agent's 49 cells take about 2 minutes at -j 4 on two quiet cores
#: (every worker imports openai, stripe and slack_sdk), the Node worker's 50 about 75 s.
SDK_MATRIX_TIMEOUT_S = 480

#: (example, buggy crashpoint.toml, the scenarios that exercise its bug, the invariant).
BUGGY = [
    (NODE, "crashpoint-buggy.toml", "crash_after_external_success", "no_duplicate_effect"),
    # Believes its own clock over the queue: only a clock stepped back shows it.
    (NODE, "crashpoint-buggy-lease-by-clock.toml", "clock_skew", "no_duplicate_effect"),
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
    # Reruns a job whose acknowledgement failed: only a broker that goes away shows it.
    (RQ, "crashpoint-buggy-rerun-on-ack-error.toml", "broker_restart", "no_duplicate_effect"),
    (
        BULLMQ,
        "crashpoint-buggy-new-key-on-retry.toml",
        "crash_after_external_success",
        "no_duplicate_effect",
    ),
    # Retries a refused write at once, within its cap: only the declared backoff shows it.
    (BULLMQ, "crashpoint-buggy-no-backoff.toml", "retry_backoff", "min_backoff"),
    # Asks whether the job ended, not whether its lease holds: only stale copies woken
    # while a third owns the job show it.
    (BULLMQ, "crashpoint-buggy-done-check.toml", "redelivery_storm", "no_duplicate_effect"),
    (
        MCP,
        "crashpoint-buggy-retry-without-lookup.toml",
        "crash_after_external_success",
        "no_duplicate_effect",
    ),
    (
        AGENT_SDK,
        "crashpoint-buggy-sdk-auto-key.toml",
        "crash_after_external_success",
        "no_duplicate_effect",
    ),
    (
        AGENT_SDK,
        "crashpoint-buggy-repost-without-lookup.toml",
        "crash_after_external_success",
        "no_duplicate_effect",
    ),
    (
        AGENT_SDK,
        "crashpoint-buggy-key-from-plan.toml",
        "crash_after_external_success",
        "stable_key_and_payload",
    ),
    (
        AGENT_SDK,
        "crashpoint-buggy-409-new-key.toml",
        "retry_while_in_flight",
        "no_duplicate_effect",
    ),
    (
        NODE_SDK,
        "crashpoint-buggy-sdk-auto-key.toml",
        "crash_after_external_success",
        "no_duplicate_effect",
    ),
    # A reply lost after the commit (held past the client's timeout, or cut by Toxiproxy):
    # SMTP has no lookup, so the correct mailer sends the job to review and the buggy
    # one sends the email again.
    (
        SMTP_NODE,
        "crashpoint-buggy-resend-after-drop.toml",
        "ambiguous_timeout",
        "no_duplicate_effect",
    ),
    # The in-house client mints a new request id per attempt: the service dedupes on it,
    # so a retry after a crash is a second order.
    (
        INHOUSE,
        "crashpoint-buggy-fresh-key.toml",
        "crash_after_external_success",
        "no_duplicate_effect",
    ),
]


def config(example: Example, name: str = "crashpoint.toml") -> str:
    return str((ROOT / "examples" / example.name / name).relative_to(ROOT))


#: Whole matrices of the examples: `nox -s examples` runs them (the default test run plays
#: each correct variant on the cells its buggy variants break, below, and a command
#: target's whole matrix in tests/process/test_any_worker.py). They test the same harness
#: paths that whole matrix and the reference's already do, at about 400 s of the default
#: run's CPU on two cores.
WHOLE = pytest.mark.matrix


@pytest.mark.parametrize(
    "example",
    [pytest.param(e, marks=WHOLE) for e in (NODE, RQ, BULLMQ)],
    ids=lambda e: e.name,
)
def test_the_correct_variant_holds_the_whole_matrix(
    example: Example, scratch: Path, request: pytest.FixtureRequest
) -> None:
    require(request.config, example)
    out = scratch / "out"
    # --strict: every cell that applies to the example runs and holds; what cannot apply
    # to a command target is left out, not skipped.
    done = run(
        ["-c", config(example), "-j", MATRIX_JOBS, "--strict", "--out", str(out)],
        scratch,
        timeout_s=MATRIX_TIMEOUT_S,
    )
    doc = results(out)
    verdicts = Counter(t["verdict"] for t in doc["trials"])
    not_held = [
        (t["id"], t["verdict"], t.get("reason"), [v["invariant"] for v in t["violations"]])
        for t in doc["trials"]
        if t["verdict"] != "held"
    ]
    assert not not_held, not_held
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert verdicts["held"] > 0
    # Every declared provider got cells, and every scenario ran for it.
    assert {t["provider_name"] for t in doc["trials"]} >= {"billing", "mailer"}
    assert leftovers(scratch) == []


@WHOLE
@pytest.mark.timeout(MCP_MATRIX_TIMEOUT_S + 60)
def test_the_mcp_agent_holds_the_whole_matrix(
    scratch: Path, request: pytest.FixtureRequest
) -> None:
    require(request.config, MCP)
    out = scratch / "out"
    done = run(
        ["-c", config(MCP), "-j", MATRIX_JOBS, "--fail-on-warning", "--strict", "--out", str(out)],
        scratch,
        timeout_s=MCP_MATRIX_TIMEOUT_S,
    )
    doc = results(out)
    # The agent declares no outbox relay, runs no pool, declares no next release, no cancel
    # and no broker: those rows are left out of its matrix, listed once, never run.
    left_out = [c for g in doc["not_applicable"] for c in g["cells"]]
    assert {c.split(".")[0] for c in left_out} == {
        "relay_crash_after_send",
        "child_killed",  # it runs no pool
        "upgrade_during_recovery",
        "cancel_in_flight",
        "broker_restart",  # nor a broker
    }
    ran = doc["trials"]
    not_held = [
        (t["id"], t["verdict"], t.get("reason"), [v["invariant"] for v in t["violations"]])
        for t in ran
        if t["verdict"] != "held"
    ]
    assert not not_held, not_held
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    # Both tool servers got every scenario's cells (a forgotten key only matters where
    # keys are kept), and the honest tools raised no warning.
    by_server = Counter(t["provider_name"] for t in ran)
    assert set(by_server) == {"tickets", "chat"}
    # Rows for keys only: a forgotten key, and a retry that meets its first in flight.
    keyed = sum(1 for t in ran if t["scenario"] in ("key_retention", "retry_while_in_flight"))
    assert keyed > 1
    assert by_server["tickets"] == by_server["chat"] + keyed
    assert [w for t in doc["trials"] for w in t.get("warnings", [])] == []
    # The tools were called: every trial's writes went through /mcp.
    paths = {
        e["fields"]["path"]
        for t in doc["trials"]
        for e in t["events"]
        if e["kind"] == "arrival" and e["source"].startswith("provider:")
    }
    assert paths == {"/mcp/tools/create_ticket", "/mcp/tools/send_message"}
    assert leftovers(scratch) == []


@WHOLE
@pytest.mark.timeout(SDK_MATRIX_TIMEOUT_S + 60)
@pytest.mark.parametrize(
    ("example", "ran", "left_out", "route"),
    [
        # The model commits no effect: its cells are listed as not applicable, never run.
        pytest.param(
            AGENT_SDK, {"billing", "chat"}, {"model"}, "/v1/payment_intents", id=AGENT_SDK.name
        ),
        pytest.param(
            NODE_SDK, {"billing", "mailer"}, set(), "/v1/payment_intents", id=NODE_SDK.name
        ),
        # nodemailer speaks SMTP: every message is an arrival at DATA.
        pytest.param(SMTP_NODE, {"mailer"}, set(), "DATA", id=SMTP_NODE.name),
        # The in-house orders client, unchanged, against its declared routes.
        pytest.param(INHOUSE, {"orders"}, set(), "/orders", id=INHOUSE.name),
    ],
)
def test_the_sdk_examples_hold_the_whole_matrix(
    example: Example,
    ran: set[str],
    left_out: set[str],
    route: str,
    scratch: Path,
    request: pytest.FixtureRequest,
) -> None:
    require(request.config, example)
    out = scratch / "out"
    done = run(
        ["-c", config(example), "-j", MATRIX_JOBS, "--strict", "--out", str(out)],
        scratch,
        timeout_s=SDK_MATRIX_TIMEOUT_S,
    )
    doc = results(out)
    not_held = [
        (t["id"], t["verdict"], t.get("reason"), [v["invariant"] for v in t["violations"]])
        for t in doc["trials"]
        if t["verdict"] != "held"
    ]
    assert not not_held, not_held
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert {t["provider_name"] for t in doc["trials"]} == ran
    listed = {c.split(".")[2] for g in doc["not_applicable"] for c in g["cells"]}
    assert left_out <= listed
    # Every write went through a persona's own route (the clients were pointed at them).
    paths = {
        e["fields"]["path"].split("?")[0]
        for t in doc["trials"]
        for e in t["events"]
        if e["kind"] == "arrival" and e["source"].startswith("provider:")
    }
    assert route in paths, paths
    assert leftovers(scratch) == []


#: Each example with a buggy variant, and the scenarios its buggy variants are caught in.
CAUGHT_IN = {
    e: sorted({scenario for b, _, scenario, _ in BUGGY if b == e})
    for e in sorted({e for e, _, _, _ in BUGGY}, key=lambda e: e.name)
}


@pytest.mark.parametrize("example", CAUGHT_IN, ids=[e.name for e in CAUGHT_IN])
def test_the_correct_variant_holds_where_its_buggy_variants_fail(
    example: Example, scratch: Path, request: pytest.FixtureRequest
) -> None:
    """The pair that makes a buggy variant's failure mean something: on the same cells,
    the correct variant holds every one, under --strict. One run per example, all its
    scenarios in it: each run's fixed cost (providers, Toxiproxy, preloaded imports) is
    paid once."""
    require(request.config, example)
    out = scratch / "out"
    scenarios = CAUGHT_IN[example]
    args = ["-c", config(example), "-j", "4", "--strict"]
    args += [a for scenario in scenarios for a in ("--scenario", scenario)]
    done = run([*args, "--out", str(out)], scratch)
    trials = results(out)["trials"]
    assert {t["scenario"] for t in trials} == set(scenarios)
    not_held = [(t["id"], t["verdict"], t.get("reason")) for t in trials if t["verdict"] != "held"]
    assert not not_held, not_held
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
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
    # -x: that the bug is caught is the claim; its other cells would only repeat it.
    args = ["-c", config(example, variant), "-j", "2", "-x", "--scenario", scenario]
    done = run([*args, "--out", str(out)], scratch)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    trials = results(out)["trials"]
    named = {v["invariant"] for t in trials for v in t["violations"]}
    assert invariant in named, named
    # Every cell either ran, or was left out because of the violation and says so.
    assert all(
        t["verdict"] != "skipped" or t["reason"].startswith("not started: --maxfail 1")
        for t in trials
    ), [t["reason"] for t in trials]
    assert leftovers(scratch) == []


def test_a_tool_that_claims_idempotence_it_lacks_is_a_warning(
    scratch: Path, request: pytest.FixtureRequest
) -> None:
    """The chat server declares its plain send_message idempotent; the agent that
    retries without a lookup sends twice: a violation for the agent, and a
    tool_annotations warning for the server's false declaration."""
    require(request.config, MCP)
    here = ROOT / "examples" / MCP.name
    text = (here / "crashpoint-buggy-retry-without-lookup.toml").read_text()
    for name in ("worker.py", "enqueue.py", "status.py", "serve.py"):
        text = text.replace(f'"{name}"', f'"{here / name}"')
    chat = 'name = "chat"\nkind = "plain"\ntransport = "mcp"\n'
    text = text.replace(chat, chat + "tool_hints = { idempotentHint = true }\n")
    assert "tool_hints" in text
    toml = scratch / "crashpoint.toml"
    toml.write_text(text)
    out = scratch / "out"
    args = ["-c", str(toml), "--scenario", "crash_after_external_success", "--provider", "chat"]
    done = run([*args, "--signal", "SIGKILL", "--out", str(out)], scratch)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    [trial] = results(out)["trials"]
    assert "no_duplicate_effect" in {v["invariant"] for v in trial["violations"]}
    [warning] = trial["warnings"]
    assert warning["warning"] == "tool_annotations"
    assert "tool send_message at chat declares idempotentHint: true" in warning["message"]
    assert leftovers(scratch) == []


def test_check_config_sees_the_smtp_workers_message(
    scratch: Path, request: pytest.FixtureRequest
) -> None:
    """check-config hands the worker the SMTP address (not the HTTP control port, and no
    HTTP tap in between) and reads the message's job and Message-ID back."""
    require(request.config, SMTP_NODE)
    done = run(["-c", config(SMTP_NODE)], scratch, command="check-config")
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert "mailer (smtp over unqueryable)" in said
    assert "smtp: SMTP DATA (write)" in said
    assert "carries '<receipt-j-0001@billing.example.com>' and the job's id" in said
    assert "exactly one effect for j-0001" in said
    assert leftovers(scratch) == []
