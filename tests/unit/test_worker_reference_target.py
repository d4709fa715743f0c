"""The in-process adapter the harness drives: enqueue, read, quiescence, snapshot/restore."""

from __future__ import annotations

import time
from pathlib import Path

from scenarios import INVARIANTS, MUTANTS, ReferenceTarget


def test_relative_sqlite_dsn_resolves_in_the_state_dir(tmp_path: Path) -> None:
    with ReferenceTarget("sqlite:///ledger.db", state_dir=tmp_path) as target:
        target.setup()
        assert (tmp_path / "ledger.db").exists()
        assert (
            target.worker_env("w1")["CRASHPOINT_LEDGER_DSN"]
            == f"sqlite:///{(tmp_path / 'ledger.db').resolve()}"
        )


def test_postgres_schema_moves_out_of_the_dsn(tmp_path: Path) -> None:
    target = ReferenceTarget("postgresql://u:p@127.0.0.1:5432/db?schema=s9", state_dir=tmp_path)
    env = target.worker_env("w1")
    assert env["CRASHPOINT_LEDGER_DSN"] == "postgresql://u:p@127.0.0.1:5432/db"
    assert env["CRASHPOINT_LEDGER_SCHEMA"] == "s9"


def test_view_quiescence_and_restore(tmp_path: Path) -> None:
    with ReferenceTarget("sqlite:///ledger.db", state_dir=tmp_path) as target:
        target.setup()
        assert target.enqueue("j-0001", "billing", {"job_id": "j-0001"})
        assert not target.enqueue("j-0001", "billing", {"job_id": "j-0001"})
        assert target.enqueue("j-0002", "billing", {"job_id": "j-0002"})
        snap = target.snapshot()
        view = target.read_ledger()
        assert [j.job_id for j in view.jobs] == ["j-0001", "j-0002"]
        assert not target.quiescent(view)
        assert not target.jobs_quiescent()
        # Drive both jobs to an end the way a worker would.
        store = target.ledger
        now = time.monotonic()
        for _ in range(2):
            c = store.claim("w1", now=now, ttl_s=1.0, max_attempts=3)
            assert c is not None
            store.write_result(c, "succeeded" if c.job_id == "j-0001" else "needs_review", now=now)
        view = target.read_ledger()
        assert target.quiescent(view)
        assert target.quiescent(view, ["j-0001"])
        assert not target.quiescent(view, ["j-0003"]), "an unknown job is not finished"
        assert target.jobs_quiescent()
        assert target.jobs_quiescent(["j-0001"])
        assert not target.jobs_quiescent(["j-0003"])
        assert [(c.job_id, c.token) for c in view.claims] == [("j-0001", 1), ("j-0002", 1)]
        assert [w.outcome for w in view.result_writes] == ["succeeded", "needs_review"]
        target.restore(snap)
        after = target.read_ledger()
        assert {j.delivery_state for j in after.jobs} == {"queued"}
        assert {j.token for j in after.jobs} == {1}, "tokens survive the restore"
        assert len(after.claims) == 2, "audit rows are evidence and are not rolled back"


def test_every_mutant_names_a_known_invariant_and_scenario() -> None:
    from scenarios.table import BY_NAME

    # The design's twelve, and those added since.
    assert {
        "fresh_key_per_attempt",
        "key_persisted_after_call",
        "timeout_is_failure",
        "no_cas_on_result",
        "renew_without_owner_check",
        "lease_checked_only_at_claim",
        "skip_reconcile_after_restart",
        "lookup_error_is_not_found",
        "conflict_409_new_key",
        "timestamp_in_payload",
        "uncapped_retries",
        "ack_before_effect",
    } < set(MUTANTS)
    for name, m in MUTANTS.items():
        assert m.name == name
        assert m.invariant in INVARIANTS
        assert m.exposed_by in BY_NAME, m.exposed_by
