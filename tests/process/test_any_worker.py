"""A third-party worker is judged by its own declarations, never by the reference's.

The worker is ``tests/process/workers/pyqueue``: Python's standard library only, its own
SQLite queue in its state directory, two providers (``billing`` idempotent, ``mailer``
plain), a retry cap of 6 and a status command, all described in its ``crashpoint.toml``.
The real CLI runs it in a subprocess. The correct worker must hold everything it runs
(a false alarm is the worst bug this tool can have); each buggy variant must be caught
by the invariant it breaks; without a status command the report says what it could not
judge instead of guessing.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from clikit import MATRIX_JOBS, ROOT, leftovers, results, run

from fake_providers import Fault
from harness.history import Event
from harness.infra import RunInfra
from harness.oracle import TrialFacts, check
from harness.plan import Cell, cells
from harness.targets.config import load_config
from harness.trial import Trial, TrialConfig
from scenarios.table import BY_NAME

pytestmark = pytest.mark.process

PYQUEUE = ROOT / "tests" / "process" / "workers" / "pyqueue"
MATRIX_TIMEOUT_S = 600


def run_pyqueue(
    toml: str, scratch: Path, out: Path, *filters: str, timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    """``crashpoint run -c pyqueue/TOML FILTERS`` with a fixed seed, results in ``out``."""
    args = ["-c", str(PYQUEUE / toml), *filters, "--seed", "3", "--out", str(out)]
    return run(args, scratch, timeout_s=timeout_s)


def trials(out: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = results(out)["trials"]
    return found


def explain(trial: dict[str, Any]) -> str:
    lines = [f"{trial['id']}: {trial['verdict']} ({trial['reason']})"]
    lines += [f"  {v['invariant']}: {v['message']}" for v in trial["violations"]]
    return "\n".join(lines)


def test_the_correct_worker_holds_every_cell_at_both_providers(
    scratch: Path, tmp_path: Path
) -> None:
    # The longest test of the default run (about 45 s on two quiet cores, 55 to 62 s under
    # stress-ng --cpu 2): the one whole matrix of a command target in it, 64 cells, each
    # trial's status and enqueue a process start, as most third-party workers declare them.
    out = tmp_path / "out"
    done = run_pyqueue(
        "crashpoint.toml", scratch, out, "-j", MATRIX_JOBS, timeout_s=MATRIX_TIMEOUT_S
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert leftovers(scratch) == []
    every = trials(out)
    # It declares no outbox relay: that row is left out of this target's matrix and
    # listed once, never run and never skipped. Its clock (a Python program, which loads
    # libfaketime) is stepped like the reference worker's.
    left_out = {g["reason"]: g["cells"] for g in results(out)["not_applicable"]}
    assert {c.split(".")[0] for cells in left_out.values() for c in cells} == {
        "relay_crash_after_send",
        "child_killed",  # it declares no pool
        "broker_restart",  # nor a broker
    }
    assert any("this target declares none ([target] relay" in r for r in left_out)
    assert "relay_crash_after_send" not in {t["scenario"] for t in every}
    assert {t["injection_point"] for t in every if t["scenario"] == "clock_skew"} == {
        "worker_behind",
        "worker_ahead",
    }
    for t in every:
        assert (t["verdict"], t["reached"], t["violations"]) == ("held", True, []), explain(t)
        # Its cap and its job states are declared: all but lease tokens was judged (it
        # keeps no ledger whose claims the harness could read), and, where jobs are bound
        # to identities, whose identity acted (it sends none).
        bound = t["scenario"] == "identity_lost_on_recovery"
        assert set(t["unjudged"]) == {"fenced_writes"} | ({"identity_bound"} if bound else set())
    by_provider = Counter((t["provider_name"], t["provider"]) for t in every)
    assert set(by_provider) == {("billing", "idempotent"), ("mailer", "plain")}
    # Every scenario that supports a kind ran there, the ledger-link ones aside.
    # key_retention (a forgotten idempotency key) and retry_while_in_flight (a retry that
    # meets its first write in flight) run at idempotent providers only.
    assert by_provider[("billing", "idempotent")] == 33
    assert by_provider[("mailer", "plain")] == 31
    scenarios = {(t["scenario"], t["injection_point"], t["provider_name"]) for t in every}
    for name in ("billing", "mailer"):
        assert ("state_store_restore", "restore_after_effect", name) in scenarios
        assert ("provider_error_before_commit", "fail_past_cap", name) in scenarios
        assert ("duplicate_delivery", "redelivered_while_in_flight", name) in scenarios
    assert {t["reached_by"] for t in every} == {"failpoint", "provider", None}
    # Jobs went to the cell's provider only; the other one was up, and left alone.
    for t in every:
        sources = {e["source"] for e in t["events"] if e["kind"] == "arrival"}
        assert sources == {f"provider:{t['provider_name']}"}, t["id"]


def test_duplicate_delivery_is_a_redelivery_the_worker_consumes_at_every_kind(
    scratch: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    done = run_pyqueue("crashpoint.toml", scratch, out, "--scenario", "duplicate_delivery")
    assert done.returncode == 0, done.stderr
    both = trials(out)
    assert {(t["provider_name"], t["provider"]) for t in both} == {
        ("billing", "idempotent"),
        ("mailer", "plain"),
    }
    for t in both:
        assert (t["verdict"], t["reached"], t["reached_by"]) == ("held", True, "failpoint"), (
            explain(t)
        )
        events = t["events"]
        assert [e["job"] for e in events if e["kind"] == "enqueue"].count("j-0001") == 2
        # A worker took the second delivery up (the first one's was held meanwhile) ...
        enqueued_again = [e["t"] for e in events if e["kind"] == "enqueue"][-1]
        taken = [
            e
            for e in events
            if e["kind"] == "failpoint"
            and e["job"] == "j-0001"
            and e["fields"]["point"] == "after_claim"
            and enqueued_again < e["t"]
        ]
        assert taken, explain(t)
        # ... and waited for the first attempt instead of sending: one write, one effect.
        writes = [e for e in events if e["kind"] == "arrival" and e["job"] == "j-0001"]
        assert len(writes) == 1, explain(t)


def test_a_worker_that_retries_five_times_holds_under_its_own_cap_of_six() -> None:
    config = load_config(PYQUEUE / "crashpoint.toml")
    assert config.max_attempts == 6
    declared = [(p.name, p.kind) for p in config.providers]
    scenario = BY_NAME["provider_error_before_commit"]
    cell: Cell = next(c for c in cells([scenario], declared=declared) if c.provider_name)

    def fail_five_times(trial: Trial) -> frozenset[str]:
        job = trial.enqueue_batch()
        trial.arm(Fault("fail_before_commit", job=job, times=5, status=503))
        trial.start_worker()
        trial.reached = True
        return frozenset()

    settings = TrialConfig(lease_ttl_s=config.lease_ttl_s, http_timeout_s=0.6)
    with RunInfra.open(
        [cell], ledger="sqlite", backend="process", pg_dsn=None, command=config, config=settings
    ) as infra:
        result = infra.run_trial(cell, 1, fail_five_times)
    assert result.verdict == "held", [v.message for v in result.violations]
    writes = [e for e in result.events if e["kind"] == "arrival" and e["job"] == "j-0001"]
    assert [w["fields"]["status"] for w in writes] == [503] * 5 + [201]
    # The same history under the reference worker's cap of 3 is the false alarm this
    # worker would have got, had its limit been borrowed.
    events = [
        Event(e["t"], e["source"], e["kind"], e["job"], e["attempt"], e["fields"])
        for e in result.events
    ]
    borrowed = TrialFacts(
        jobs=["j-0001", "j-0002"],
        provider_kinds={"billing": "idempotent", "mailer": "plain"},
        max_attempts=3,
    )
    assert {v.invariant for v in check(events, borrowed)} == {"bounded_retries"}


def test_a_worker_that_counts_claims_is_held_to_the_writes_the_provider_received(
    scratch: Path, tmp_path: Path
) -> None:
    """A correct worker that retries through its queue and reports claims as attempts
    keeps its cap of 3 writes; its counter says 4 at fail_past_cap (three refused writes,
    then a claim that wrote nothing and dead-lettered the job). Judged by that counter, as
    bounded_retries once was, the cell was violated ("j-0001 ran 4 attempts; the maximum
    is 3"): a false alarm."""
    out = tmp_path / "out"
    scenarios = ["ambiguous_timeout", "reset_after_commit", "provider_error_before_commit"]
    filters = [a for s in scenarios for a in ("--scenario", s)]
    done = run_pyqueue(
        "crashpoint-counts-claims.toml", scratch, out, *filters, "--provider", "billing", "--strict"
    )
    assert done.returncode == 0, "\n".join(explain(t) for t in trials(out)) + done.stderr
    by_cell = {t["injection_point"]: t for t in trials(out)}
    past_cap = by_cell["fail_past_cap"]
    writes = [e for e in past_cap["events"] if e["kind"] == "arrival" and e["job"] == "j-0001"]
    (state,) = [j for j in past_cap["facts"]["job_states"] if j["job_id"] == "j-0001"]
    assert (len(writes), state["attempts"], state["delivery_state"]) == (3, 4, "dead_lettered")
    # Where an outcome was unknown, the reconcile was a claim of its own too.
    assert by_cell["toxic_timeout"]["verdict"] == "held"
    assert max(j["attempts"] for j in by_cell["toxic_timeout"]["facts"]["job_states"]) >= 2


def test_a_worker_that_declares_three_and_sends_five_is_caught(
    scratch: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    done = run_pyqueue(
        "crashpoint-over-cap.toml",
        scratch,
        out,
        "--scenario",
        "provider_error_before_commit",
        "--point",
        "fail_past_cap",
        "--provider",
        "billing",
    )
    assert done.returncode == 1, done.stderr
    (trial,) = trials(out)
    assert (trial["verdict"], trial["provider_name"]) == ("violated", "billing")
    messages = {v["message"] for v in trial["violations"] if v["invariant"] == "bounded_retries"}
    assert "5 writes for j-0001 reached billing; the maximum is 3" in messages
    assert "--provider billing" in trial["replay"]


def test_a_worker_that_closes_a_job_without_its_effect_is_caught_by_nothing_lost(
    scratch: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    done = run_pyqueue(
        "crashpoint-done-without-effect.toml",
        scratch,
        out,
        "--scenario",
        "crash_before_external_call",
        "--signal",
        "SIGKILL",
    )
    assert done.returncode == 1, done.stderr
    caught = trials(out)
    assert {t["provider_name"] for t in caught} == {"billing", "mailer"}
    for t in caught:
        assert t["verdict"] == "violated", explain(t)
        assert {(v["invariant"], v["job"]) for v in t["violations"]} == {("nothing_lost", "j-0001")}
        (v,) = t["violations"]
        assert v["message"].startswith(
            f"j-0001 is acknowledged but its committed effects are 0 at {t['provider_name']}"
        ), v["message"]
        # Decided as soon as the job ended, not after a fixed silence.
        assert t["duration_s"] < 10, t["duration_s"]


def test_without_a_status_command_the_report_says_what_it_could_not_judge(
    scratch: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    done = run_pyqueue(
        "crashpoint-no-status.toml",
        scratch,
        out,
        "--scenario",
        "crash_before_external_call",
        "--scenario",
        "provider_error_before_commit",
        "--signal",
        "SIGKILL",
    )
    assert done.returncode == 0, done.stderr
    judged = trials(out)
    assert len(judged) == 6  # two scenarios' points at two providers
    for t in judged:
        assert t["verdict"] == "held", explain(t)
        # This variant declares no backoff either: its retry intervals are only shown.
        assert set(t["unjudged"]) == {"nothing_lost", "fenced_writes", "min_backoff"}
        assert "declare [target] status" in t["unjudged"]["nothing_lost"]
        # A correctly dead-lettered job (fail_past_cap) has no effect: held, not 20 s of
        # inconclusive.
        assert t["duration_s"] < 10, t["duration_s"]
    past_cap = [t for t in judged if t["injection_point"] == "fail_past_cap"]
    assert len(past_cap) == 2


def test_an_email_in_the_key_is_a_warning_that_fails_only_when_told_to(
    scratch: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    filters = ("--scenario", "crash_after_external_success", "--signal", "SIGKILL")
    done = run_pyqueue("crashpoint-email-key.toml", scratch, out, *filters)
    assert done.returncode == 0, done.stderr
    found = trials(out)
    assert {t["verdict"] for t in found} == {"held"}, [explain(t) for t in found]
    for trial in found:
        (warning,) = {w["warning"]: w for w in trial["warnings"]}.values()
        assert warning["warning"] == "key_hygiene"
        assert "email address" in warning["message"]
        assert "@customers.example" not in warning["message"]
        assert "<email address:" in warning["evidence"]["name"]
    assert results(out)["summary"]["warnings"] >= len(found)
    gated = run_pyqueue(
        "crashpoint-email-key.toml", scratch, tmp_path / "gated", *filters, "--fail-on-warning"
    )
    assert gated.returncode == 1, gated.stderr


def test_a_worker_that_names_no_identity_leaves_identity_bound_unjudged(
    scratch: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    done = run_pyqueue("crashpoint.toml", scratch, out, "--scenario", "identity_lost_on_recovery")
    assert done.returncode == 0, done.stderr
    found = trials(out)
    assert len(found) == 4  # two points, two providers
    for trial in found:
        assert trial["verdict"] == "held", explain(trial)
        assert "X-Crashpoint-Identity" in trial["unjudged"]["identity_bound"]
