"""The pytest plugin's pure parts: item names, verdict -> outcome, the failure text, the
options (parsed in-process, no session run), and a custom trial's verdict object."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness import pytest_plugin, pytest_session
from harness.contract.errors import ConfigError
from harness.explain import event_line, evidence_lines, explain
from harness.oracle import Violation
from harness.plan import Cell, select_cells
from harness.pytest_items import CellFailed, item_name, outcome
from harness.pytest_options import read_settings
from harness.scenario_api import ScenarioVerdict, custom_cell, provider_kind
from harness.targets.config import CommandConfig, ProviderDecl
from harness.trial_run import TrialResult

pytest_plugins = ["pytester"]

PAGE = Path("out/trials/x.html")
REPLAY = "crashpoint run --scenario s --seed 7"


def cell(scenario: str = "crash_after_external_success", signal: str = "SIGKILL") -> Cell:
    (c,) = select_cells(scenarios=[scenario], providers=["plain"], signals=[signal])
    return c


def result(verdict: str, *, reason: str | None = None, violations: Any = ()) -> TrialResult:
    events = [
        {
            "t": 0.1,
            "source": "worker:w1",
            "kind": "claim",
            "job": "j-0001",
            "attempt": 1,
            "fields": {"token": 1},
        },
        {
            "t": 0.25,
            "source": "supervisor",
            "kind": "signal",
            "job": None,
            "attempt": None,
            "fields": {"signal": "SIGKILL", "worker": "w1", "pid": 4242},
        },
    ]
    return TrialResult(cell(), 1, verdict, True, reason, list(violations), 0.5, events)


DUPLICATE = Violation(
    "no_duplicate_effect",
    "j-0001",
    "2 committed effects for j-0001 at svc",
    {"effects": [{"id": 1, "t_wall": 9.0, "idempotency_key": "k-1"}] * 6, "events": [1]},
    [1],
)


def test_item_names_are_scenario_with_point_provider_and_signal() -> None:
    assert item_name(cell()) == "crash_after_external_success[after_external_call-plain-SIGKILL]"
    (no_signal,) = select_cells(scenarios=["duplicate_delivery"])
    assert item_name(no_signal) == (
        "duplicate_delivery[redelivered_while_in_flight-idempotent-none]"
    )
    # A cell that carries its provider's own name (a command target's) shows that name.
    named: Any = SimpleNamespace(
        scenario=SimpleNamespace(name="s"),
        point="p",
        provider="plain",
        signal=None,
        provider_name="billing",
    )
    assert item_name(named) == "s[p-billing-none]"


def test_held_passes_skipped_skips_and_inconclusive_fails_unless_told_to_skip() -> None:
    assert outcome(result("held"), title="t", page=PAGE, replay=REPLAY, inconclusive="fail") is None
    with pytest.raises(pytest.skip.Exception, match="no Toxiproxy"):
        outcome(
            result("skipped", reason="no Toxiproxy"),
            title="t",
            page=PAGE,
            replay=REPLAY,
            inconclusive="fail",
        )
    late = result("inconclusive", reason="failpoint x was never reached")
    with pytest.raises(CellFailed, match="t: inconclusive: failpoint x was never reached"):
        outcome(late, title="t", page=PAGE, replay=REPLAY, inconclusive="fail")
    with pytest.raises(pytest.skip.Exception, match="inconclusive: failpoint x"):
        outcome(late, title="t", page=PAGE, replay=REPLAY, inconclusive="skip")


def test_a_violation_fails_with_its_evidence_page_and_replay() -> None:
    with pytest.raises(CellFailed) as caught:
        outcome(
            result("violated", violations=[DUPLICATE]),
            title="cell[x]",
            page=PAGE,
            replay=REPLAY,
            inconclusive="skip",
        )
    text = str(caught.value)
    assert text.splitlines()[0] == "cell[x]: violated"
    assert "  no_duplicate_effect (job j-0001): 2 committed effects for j-0001 at svc" in text
    assert "effects: 6" in text
    assert "... and 2 more on the trial page" in text
    assert "#1 0.250s supervisor signal pid=4242 signal=SIGKILL worker=w1" in text
    assert "t_wall" not in text
    assert f"trial page: {PAGE}" in text
    assert text.endswith(f"replay: {REPLAY}")


def test_event_lines_leave_out_ids_and_cut_long_values() -> None:
    event = {
        "t": 1.5,
        "source": "provider:svc",
        "kind": "arrival",
        "job": "j-1",
        "attempt": None,
        "fields": {"id": 9, "fingerprint": "f" * 64, "body": "x" * 500, "status": 201},
    }
    line = event_line(3, event)
    assert line.startswith("#3 1.500s provider:svc arrival job=j-1 ")
    assert "id=9" not in line
    assert f"fingerprint={'f' * 11}…" in line
    assert len(line) < 200
    assert "status=201" in line
    # A violation citing no events and no rows says nothing more.
    assert evidence_lines(Violation("x", None, "m"), []) == []
    assert explain("t", verdict="held", reason=None, violations=[], events=[]) == "t: held"


def test_options_come_from_the_command_line_before_the_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        "[pytest]\ncrashpoint_config = worker/crashpoint.toml\ncrashpoint_ledger = postgres\n"
        "crashpoint_scenarios =\n    a\n    b\ncrashpoint_out = reports\n"
    )
    ini = read_settings(pytester.parseconfig())
    assert ini.items is False
    assert ini.target == "worker/crashpoint.toml"
    assert ini.target_path(pytester.path) == pytester.path / "worker" / "crashpoint.toml"
    assert (ini.ledger, ini.scenarios, ini.out) == (
        "postgres",
        ("a", "b"),
        pytester.path / "reports",
    )

    cli = read_settings(
        pytester.parseconfig(
            "--crashpoint=reference",
            "--crashpoint-ledger=sqlite",
            "--crashpoint-scenario=c",
            "--crashpoint-seed=7",
            "--crashpoint-inconclusive=skip",
        )
    )
    assert cli.items is True
    assert cli.target_path(pytester.path) is None
    assert (cli.ledger, cli.scenarios, cli.seed, cli.inconclusive) == ("sqlite", ("c",), 7, "skip")
    # A bare --crashpoint keeps the configured target.
    assert read_settings(pytester.parseconfig("--crashpoint")).target == "worker/crashpoint.toml"


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--crashpoint-ledger=mysql"], "--crashpoint-ledger 'mysql' is unknown"),
        (["--crashpoint-seed=x"], "--crashpoint-seed 'x' must be a whole number"),
        (["--crashpoint-lease-ttl-s=600"], "must be seconds from 0.1 to 60"),
        (["--crashpoint-inconclusive=ignore"], "choose from fail, skip"),
    ],
)
def test_a_bad_option_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, args: list[str], complaint: str
) -> None:
    with pytest.raises(pytest.UsageError, match=complaint):
        read_settings(pytester.parseconfig(*args))


def test_the_plugin_and_the_session_agree_on_the_shard_key() -> None:
    assert pytest_plugin._SHARD_KEY == pytest_session.SHARD_KEY


def test_a_custom_verdict_explains_itself_and_asserts() -> None:
    held = ScenarioVerdict("held", (), None, True, ())
    held.assert_held()
    bad = ScenarioVerdict(
        "violated",
        (DUPLICATE, DUPLICATE),
        None,
        True,
        (),
        name="t",
        page=PAGE,
        replay="pytest t.py::t",
    )
    assert bad.invariants == ["no_duplicate_effect"]
    assert repr(bad) == "<ScenarioVerdict violated: no_duplicate_effect>"
    with pytest.raises(AssertionError, match="t: violated") as caught:
        bad.assert_held()
    assert "replay: pytest t.py::t" in str(caught.value)


def test_a_custom_cell_is_filed_under_its_own_scenario() -> None:
    c = custom_cell("tests/test_x.py::test_y", provider="plain", description="why")
    assert c.id == "tests/test_x.py::test_y.custom.plain.none.sqlite.process"
    assert c.scenario.injection == "why"
    assert provider_kind(None, None) == "idempotent"
    command = CommandConfig(
        path=Path("/w/crashpoint.toml"),
        name="w",
        command=("w",),
        enqueue=("e", "{job_id}"),
        workers=1,
        lease_ttl_s=1.0,
        ledger_dsn=None,
        providers=(ProviderDecl("billing", "unqueryable"),),
    )
    assert provider_kind(command, None) == "unqueryable"
    assert provider_kind(command, "billing") == "unqueryable"
    with pytest.raises(ConfigError, match="its provider is billing"):
        provider_kind(command, "plain")
