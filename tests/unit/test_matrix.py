"""Cell selection, sharding, exit codes, replay commands and the kill matrix (no processes)."""

from __future__ import annotations

from typing import Any

import pytest

from harness.contract.errors import ConfigError
from harness.contract.vocabulary import ExitCode
from harness.killmatrix import kill_matrix
from harness.plan import Cell, cells, select_cells, shard_of, take_shard
from harness.results import exit_code, summarize
from scenarios.mutants import MUTANTS
from scenarios.table import BY_NAME, NETWORK_POINTS, SCENARIOS, Scenario


def test_every_row_of_the_table_is_a_scenario() -> None:
    names = {s.name for s in SCENARIOS}
    # The design's thirteen rows, each once; rows added since come after them.
    assert len(names) == len(SCENARIOS)
    assert [s.name for s in SCENARIOS[:13]] == [
        "crash_before_external_call",
        "crash_during_external_call",
        "crash_after_external_success",
        "duplicate_delivery",
        "lease_expiry_slow_worker",
        "state_store_restore",
        "provider_error_before_commit",
        "simultaneous_trigger",
        "ambiguous_timeout",
        "reset_after_commit",
        "provider_down_during_reconcile",
        "ledger_link_faults",
        "slow_lease_renewal",
    ]
    assert {m.exposed_by for m in MUTANTS.values()} <= names


def test_cells_cross_points_providers_and_signals() -> None:
    crash = cells([BY_NAME["crash_during_external_call"]])
    assert len(crash) == 2 * 3 * 2
    assert {c.signal for c in crash} == {"SIGKILL", "SIGTERM"}


def test_ledger_only_rows_need_postgres() -> None:
    assert not [c for c in cells() if c.scenario.name == "slow_lease_renewal"]
    assert [c for c in cells(ledger="postgres") if c.scenario.name == "slow_lease_renewal"]


def test_network_property_follows_the_point() -> None:
    ambiguous = cells([BY_NAME["ambiguous_timeout"]])
    assert {c.network for c in ambiguous} == {True, False}
    assert all(c.point in NETWORK_POINTS for c in ambiguous if c.network)


def test_cell_ids_are_unique_and_name_the_mutant() -> None:
    ids = [c.id for c in cells()]
    assert len(ids) == len(set(ids))
    c = Cell(BY_NAME["duplicate_delivery"], "redelivered_while_in_flight", "idempotent", None)
    assert c.id == "duplicate_delivery.redelivered_while_in_flight.idempotent.none.sqlite.process"
    m = Cell(c.scenario, c.point, c.provider, None, mutant="uncapped_retries")
    assert m.id.startswith("uncapped_retries.")


def test_shards_partition_the_cells() -> None:
    every = select_cells()
    shards = [select_cells(shard=f"{i}/3") for i in (1, 2, 3)]
    assert sorted(c.id for s in shards for c in s) == sorted(c.id for c in every)


@pytest.mark.parametrize("count", [2, 3, 4, 7])
def test_adding_a_scenario_moves_no_cell_to_another_shard(count: int) -> None:
    new = Scenario("new_row", "a fault", "state", "recovery", points=("p1",), providers=("plain",))
    # In the middle of the table, where a positional split would shift every later cell.
    before = cells(SCENARIOS)
    after = cells((*SCENARIOS[:4], new, *SCENARIOS[4:]))
    assert len(after) > len(before)
    for index in range(1, count + 1):
        old = {c.id for c in take_shard(before, index, count)}
        now = {c.id for c in take_shard(after, index, count) if c.scenario is not new}
        assert now == old, f"shard {index}/{count} changed"
    assert {shard_of(c, count) for c in before} == set(range(1, count + 1))


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"scenarios": ["nope"]}, "--scenario 'nope' is unknown"),
        ({"scenarios": ["duplicate_delivery"], "points": ["x"]}, "--point 'x'"),
        ({"shard": "3/2"}, "--shard '3/2'"),
        ({"shard": "a/b"}, "must look like i/n"),
        ({"scenarios": ["reset_after_commit"], "shard": "9/9"}, "none of the 3 cells"),
        ({"scenarios": ["duplicate_delivery"], "providers": ["plain"]}, "leave no cell"),
    ],
)
def test_bad_selection_is_one_clear_config_error(kw: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        select_cells(**kw)


@pytest.mark.parametrize(
    ("verdicts", "strict", "code"),
    [
        # The documented, stable numbers: written out, not read back from the enum.
        (["held", "held"], False, 0),
        (["held", "violated", "inconclusive"], False, 1),
        (["held", "inconclusive"], False, 3),
        (["held", "skipped"], False, 0),
        (["held", "skipped"], True, 3),
        # Nothing held: nothing was tested, with or without --strict.
        (["skipped", "skipped"], False, 3),
        ([], False, 3),
    ],
)
def test_exit_codes(verdicts: list[str], strict: bool, code: int) -> None:
    summary = summarize([{"verdict": v} for v in verdicts])
    assert exit_code(summary, strict=strict) == code
    assert isinstance(exit_code(summary, strict=strict), ExitCode)


def _trial(mutant: str | None, scenario: str, verdict: str, *invariants: str) -> dict[str, Any]:
    return {
        "id": f"{mutant}.{scenario}",
        "mutant": mutant,
        "scenario": scenario,
        "verdict": verdict,
        "violations": [{"invariant": i} for i in invariants],
    }


def test_kill_matrix_records_killers_and_the_expected_invariant() -> None:
    trials = [
        _trial(None, "provider_error_before_commit", "held"),
        _trial("uncapped_retries", "provider_error_before_commit", "violated", "bounded_retries"),
        _trial("uncapped_retries", "crash_before_external_call", "held"),
        _trial("ack_before_effect", "crash_before_external_call", "violated", "fenced_writes"),
    ]
    km = kill_matrix(trials, MUTANTS)
    uncapped = km["mutants"]["uncapped_retries"]
    assert uncapped["killed"]
    assert uncapped["caught_as_expected"]
    assert uncapped["scenarios"] == {
        "provider_error_before_commit": "killed",
        "crash_before_external_call": "survived",
    }
    ack = km["mutants"]["ack_before_effect"]
    assert ack["killed"]
    assert not ack["caught_as_expected"]
    assert not km["mutants"]["fresh_key_per_attempt"]["killed"]
    assert km["correct_worker"] == {"trials": 1, "violations": 0, "inconclusive": 0}


def _command(**kw: Any) -> Any:
    from pathlib import Path

    from harness.targets.config import CommandConfig, ProviderDecl

    base: dict[str, Any] = {
        "path": Path("/w/crashpoint.toml"),
        "name": "w",
        "command": ("w",),
        "enqueue": ("e", "{job_id}"),
        "workers": 1,
        "lease_ttl_s": 1.0,
        "ledger_dsn": None,
        "providers": (ProviderDecl("billing", "idempotent"), ProviderDecl("mailer", "plain")),
        "max_attempts": 6,
    }
    base.update(kw)
    return CommandConfig(**base)


def _skips(command: Any) -> dict[str, str]:
    """The cells left out as not applicable to ``command``, by scenario.point.provider."""
    from harness.applicable import split

    declared = [(p.name, p.kind) for p in command.providers]
    every = cells(ledger="postgres", declared=declared)
    applies, left_out = split(every, command)
    assert len(applies) + len(left_out) == len(every)
    by_id = {c.id: c for c in every}
    return {
        f"{by_id[i].scenario.name}.{by_id[i].point}.{by_id[i].provider_name}": r
        for i, r in left_out.items()
    }


def test_cells_that_cannot_apply_are_no_skips_of_the_machine() -> None:
    # What the target lacks is not what the machine lacks: even without a Toxiproxy
    # server, infra.skipped names only the network cells, never the relay or the cap.
    from harness.infra import RunInfra

    command = _command(max_attempts=None)
    declared = [(p.name, p.kind) for p in command.providers]
    every = cells(ledger="sqlite", declared=declared)
    infra = RunInfra(ledger="sqlite", backend="process", pg_dsn=None, command=command)
    skipped = infra.skipped(every)
    assert skipped
    assert all(reason.startswith("no Toxiproxy server") for reason in skipped.values())


def test_a_command_target_leaves_out_only_the_ledger_link_outbox_and_pool_scenarios() -> None:
    skipped = _skips(_command())
    assert {k.split(".")[0] for k in skipped} == {
        "ledger_link_faults",
        "slow_lease_renewal",
        "relay_crash_after_send",
        "child_killed",
        "upgrade_during_recovery",
        "cancel_in_flight",
        "broker_restart",
    }
    for key, reason in skipped.items():
        if key.startswith("relay_crash_after_send."):
            assert "this target declares none ([target] relay" in reason
        elif key.startswith("child_killed."):
            assert "declares no pool" in reason
        elif key.startswith("upgrade_during_recovery."):
            assert "declare [target] upgraded_command" in reason
        elif key.startswith("cancel_in_flight."):
            assert "declare [target] cancel" in reason
        elif key.startswith("broker_restart."):
            assert "the target declares none (declare [target.broker]" in reason
        else:
            assert "only the reference target" in reason


def test_a_command_target_that_declares_a_relay_runs_the_relay_row() -> None:
    skipped = _skips(_command(relay=("w", "--relay")))
    assert not [k for k in skipped if k.startswith("relay_crash_after_send.")]
    assert {k.split(".")[0] for k in skipped} == {
        "ledger_link_faults",
        "slow_lease_renewal",
        "child_killed",
        "upgrade_during_recovery",
        "cancel_in_flight",
        "broker_restart",
    }


def test_a_relay_is_read_from_the_toml_and_started_in_its_role(tmp_path: Any) -> None:
    from harness.targets.command import CommandAdapter
    from harness.targets.config import load_config

    toml = tmp_path / "crashpoint.toml"
    toml.write_text(
        '[target]\nname = "w"\ncommand = ["w"]\nenqueue = ["e", "{job_id}"]\n'
        'relay = ["r", "--fast"]\n[[providers]]\nname = "billing"\nkind = "idempotent"\n'
    )
    adapter = CommandAdapter(load_config(toml), trial_dir=tmp_path)
    assert adapter.worker_argv("relay") == ["r", "--fast"]
    assert adapter.worker_argv() == ["w"]


def test_a_worker_libfaketime_cannot_reach_leaves_the_clock_cells_out(tmp_path: Any) -> None:
    from tests.unit.test_faketime_reach import elf

    static = elf(tmp_path / "worker", interp=False)
    skipped = _skips(_command(command=(str(static),), path=tmp_path / "crashpoint.toml"))
    clock = {k: r for k, r in skipped.items() if k.startswith("clock_skew.")}
    assert len(clock) == 4  # two points at each of the two providers
    assert all(
        r.endswith(
            f"{static} is statically linked: LD_PRELOAD never loads libfaketime "
            "into it, so its wall clock cannot be stepped"
        )
        for r in clock.values()
    )


def test_without_a_declared_cap_fail_past_cap_is_left_out_and_says_why() -> None:
    skipped = _skips(_command(max_attempts=None))
    capped = {k: r for k, r in skipped.items() if k.startswith("provider_error_before_commit")}
    assert set(capped) == {
        "provider_error_before_commit.fail_past_cap.billing",
        "provider_error_before_commit.fail_past_cap.mailer",
    }
    assert set(capped.values()) == {"the target declares no max_attempts"}


def test_a_target_that_never_retries_leaves_retry_backoff_out_and_says_why() -> None:
    once = {k: r for k, r in _skips(_command(max_attempts=1)).items() if "retry_backoff" in k}
    assert set(once) == {
        "retry_backoff.refused_repeatedly.billing",
        "retry_backoff.refused_repeatedly.mailer",
    }
    assert all("never retries" in r for r in once.values())
    # Without a declared cap, or with one that allows a retry, the row runs.
    for cap in (None, 2):
        assert not [k for k in _skips(_command(max_attempts=cap)) if "retry_backoff" in k]


def test_a_declared_pool_runs_child_killed() -> None:
    assert not [k for k in _skips(_command(pool=True)) if k.startswith("child_killed.")]


def test_a_declared_upgrade_and_cancel_run_their_rows() -> None:
    declared = _command(upgraded_command=("python3", "worker.py", "--v2"), cancel=("c", "{job_id}"))
    rows = ("upgrade_during_recovery.", "cancel_in_flight.")
    assert not [k for k in _skips(declared) if k.startswith(rows)]


def test_a_declared_broker_runs_broker_restart_and_the_reference_has_none() -> None:
    from harness.applicable import split
    from harness.targets.config import BrokerDecl

    redis = BrokerDecl(kind="redis", env="REDIS_URL")
    assert not [k for k in _skips(_command(broker=redis)) if k.startswith("broker_restart.")]
    every = cells(ledger="sqlite")
    _, left_out = split(every, None)
    assert {k.split(".")[0] for k in left_out} == {"broker_restart"}
    assert all("the reference worker's queue is its ledger" in r for r in left_out.values())


def test_a_postgres_ledger_of_a_command_target_is_not_restored() -> None:
    skipped = _skips(_command(ledger_dsn="postgresql://u@127.0.0.1/app"))
    restores = {k: r for k, r in skipped.items() if k.startswith("state_store_restore")}
    assert len(restores) == 2
    assert all("PostgreSQL" in r and "target.ledger.dsn" in r for r in restores.values())
    assert "state_store_restore" not in {
        k.split(".")[0] for k in _skips(_command(ledger_dsn="sqlite:///ledger.db"))
    }


def test_a_command_target_runs_each_scenario_against_every_declared_provider() -> None:
    declared = [("billing", "idempotent"), ("mailer", "plain"), ("audit", "plain")]
    mine = cells(declared=declared)
    by_scenario: dict[str, set[str | None]] = {}
    for c in mine:
        by_scenario.setdefault(c.scenario.name, set()).add(c.provider_name)
    assert by_scenario["crash_before_external_call"] == {"billing", "mailer", "audit"}
    # A command target's queue redelivers the job itself: every kind, not only idempotent.
    assert by_scenario["duplicate_delivery"] == {"billing", "mailer", "audit"}
    ids = [c.id for c in mine]
    assert len(ids) == len(set(ids))  # two plain providers are two cells
    c = next(c for c in mine if c.provider_name == "audit")
    assert c.provider == "plain"
    assert f".{c.point}.audit." in c.id
    # The filters take a kind or a name.
    assert {c.provider_name for c in select_cells(providers=["plain"], declared=declared)} == {
        "mailer",
        "audit",
    }
    assert {c.provider_name for c in select_cells(providers=["audit"], declared=declared)} == {
        "audit"
    }


def test_the_reference_targets_cells_keep_their_ids() -> None:
    ids = {c.id for c in cells()}
    assert "duplicate_delivery.redelivered_while_in_flight.idempotent.none.sqlite.process" in ids
    assert not any(".redelivered_while_in_flight.plain." in i for i in ids)
    assert all(c.provider_name is None for c in cells())


def test_the_multi_step_row_runs_for_a_command_target_only_with_steps() -> None:
    declared = [("billing", "idempotent"), ("mailer", "plain")]
    row = [BY_NAME["multi_step_job"]]
    assert cells(row, declared=declared) == []
    steps = [("charge", "billing"), ("receipt", "mailer")]
    got = cells(row, declared=declared, steps=steps)
    # Its own steps' boundaries, aimed at its first step's provider.
    assert [c.point for c in got] == [
        "before_external_call@charge",
        "after_external_call@charge",
        "after_local_write@charge",
        "before_external_call@receipt",
        "after_external_call@receipt",
    ]
    assert {c.provider_name for c in got} == {"billing"}
    chosen = select_cells(
        scenarios=["multi_step_job"],
        points=["after_local_write@charge"],
        declared=declared,
        steps=steps,
    )
    assert [c.id for c in chosen] == [
        "multi_step_job.after_local_write@charge.billing.SIGKILL.sqlite.process"
    ]


def test_the_reference_runs_the_tables_own_steps_at_every_kind() -> None:
    got = cells([BY_NAME["multi_step_job"]])
    assert {c.provider for c in got} == {"idempotent", "plain", "unqueryable"}
    assert all("@" in c.point for c in got)


def test_schedules_never_aim_at_a_model() -> None:
    # A model answers plans and commits no effect: explore aimed plain-kind schedules at
    # the agent example's model (declared first) and held it to an effect it never makes.
    from harness.applicable import effect_providers
    from harness.targets.config import ProviderDecl

    model = ProviderDecl("model", "plain", persona="openai")
    chat = ProviderDecl("chat", "plain", persona="slack")
    billing = ProviderDecl("billing", "idempotent", persona="stripe")
    command = _command(providers=(model, billing, chat))
    assert effect_providers(command) == [("billing", "idempotent"), ("chat", "plain")]
