"""The command target's configuration: every mistake is one line naming file, key and fix."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.contract.errors import ConfigError
from harness.targets.command import CommandAdapter
from harness.targets.config import (
    CommandConfig,
    DockerConfig,
    JobStatus,
    Mount,
    ProviderDecl,
    find_config,
    load_config,
    parse_status_line,
)

ROOT = Path(__file__).resolve().parents[2]

GOOD = """\
[target]
name = "billing-agent"
command = ["node", "worker.js"]
workers = 2
lease_ttl_s = 0.5
enqueue = ["node", "enqueue.js", "{job_id}", "{payload_file}"]
max_attempts = 6
status = ["node", "status.js", "{job_id}"]

[target.ledger]
dsn = "sqlite:///state/ledger.db"

[[providers]]
name = "billing"
kind = "idempotent"

[[providers]]
name = "mailer"
kind = "plain"
"""


def write(tmp_path: Path, text: str, name: str = "crashpoint.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def edited(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


def error_line(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message, message
    return message


def assert_one_line(path: Path, says: str, fix: str) -> None:
    """The file's one error line says ``says`` and, after the first "; ", ``fix``."""
    message = error_line(path)
    assert message.startswith(f"{path}: "), message
    assert says in message, message
    assert fix in message.split("; ", 1)[1], message


def test_a_full_config_loads(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    assert load_config(path) == CommandConfig(
        path=path.resolve(),
        name="billing-agent",
        command=("node", "worker.js"),
        enqueue=("node", "enqueue.js", "{job_id}", "{payload_file}"),
        workers=2,
        lease_ttl_s=0.5,
        ledger_dsn="sqlite:///state/ledger.db",
        providers=(ProviderDecl("billing", "idempotent"), ProviderDecl("mailer", "plain")),
        max_attempts=6,
        status=("node", "status.js", "{job_id}"),
    )


def test_optional_keys_have_their_defaults(tmp_path: Path) -> None:
    text = """\
[target]
name = "w"
command = ["./worker"]
enqueue = ["./enqueue", "{payload_file}"]
[[providers]]
name = "billing"
kind = "unqueryable"
"""
    config = load_config(write(tmp_path, text))
    assert (config.workers, config.lease_ttl_s, config.ledger_dsn) == (1, 1.0, None)
    # Absent means the worker declared no cap and no status command: nothing is borrowed.
    assert (config.max_attempts, config.status) == (None, None)
    # No declared SIGTERM grace: the trial's default (two leases) applies.
    assert config.term_grace_s is None
    # No declared poll: the harness's own floor bounds a redelivery's take-up.
    assert config.poll_s is None
    # No declared backoff: retry intervals are reported, never judged.
    assert config.min_backoff_s is None


def test_a_declared_backoff_reaches_the_oracle_facts(tmp_path: Path) -> None:
    path = write(tmp_path, edited("lease_ttl_s = 0.5", "lease_ttl_s = 0.5\nmin_backoff_s = 0.2"))
    config = load_config(path)
    assert config.min_backoff_s == 0.2
    assert CommandAdapter(config, trial_dir=tmp_path / "t").min_backoff_s == 0.2


def test_a_declared_broker_names_the_variable_its_url_goes_in(tmp_path: Path) -> None:
    broker = '[target.broker]\nkind = "redis"\nenv = "REDIS_URL"\n\n[target.ledger]'
    config = load_config(write(tmp_path, edited("[target.ledger]", broker)))
    assert config.broker is not None
    assert (config.broker.kind, config.broker.env) == ("redis", "REDIS_URL")
    assert load_config(write(tmp_path, GOOD)).broker is None
    # No broker is started before the trial sets the target up, and none is named.
    assert CommandAdapter(config, trial_dir=tmp_path / "t").broker_env() == {}


def test_a_broker_of_the_targets_own_is_its_commands(tmp_path: Path) -> None:
    own = (
        '[target.broker]\nstart = ["./b.sh", "start", "{port}", "{data_dir}"]\n'
        'stop = ["./b.sh", "stop", "{port}", "{signal}"]\n'
        'url = "redis://127.0.0.1:{port}/0"\nenv = "REDIS_URL"\n\n[target.ledger]'
    )
    broker = load_config(write(tmp_path, edited("[target.ledger]", own))).broker
    assert broker is not None
    assert (broker.kind, broker.url) == ("command", "redis://127.0.0.1:{port}/0")
    assert broker.stop == ("./b.sh", "stop", "{port}", "{signal}")


def test_a_declared_pool_is_kept(tmp_path: Path) -> None:
    path = write(tmp_path, edited("lease_ttl_s = 0.5", "lease_ttl_s = 0.5\npool = true"))
    assert load_config(path).pool is True
    assert load_config(write(tmp_path, GOOD)).pool is False


def test_a_declared_upgraded_command_and_cancel_reach_the_adapter(tmp_path: Path) -> None:
    text = 'upgraded_command = ["python3", "worker.py", "--v2"]\n'
    text += 'cancel = ["python3", "cancel.py", "{job_id}"]'
    config = load_config(write(tmp_path, edited("lease_ttl_s = 0.5", f"lease_ttl_s = 0.5\n{text}")))
    assert config.upgraded_command == ("python3", "worker.py", "--v2")
    assert config.cancel == ("python3", "cancel.py", "{job_id}")
    adapter = CommandAdapter(config, trial_dir=tmp_path / "t")
    assert adapter.upgraded_argv() == ["python3", "worker.py", "--v2"]
    plain = CommandAdapter(load_config(write(tmp_path, GOOD)), trial_dir=tmp_path / "t")
    assert plain.upgraded_argv() is None
    assert plain.cancel("j-1") is False  # nothing declared: nothing run


def test_a_declared_visibility_window_is_kept(tmp_path: Path) -> None:
    path = write(tmp_path, edited("lease_ttl_s = 0.5", "lease_ttl_s = 0.5\nvisibility_s = 2"))
    assert CommandAdapter(load_config(path), trial_dir=tmp_path / "t").visibility_s == 2.0
    assert load_config(write(tmp_path, GOOD)).visibility_s is None


def test_a_declared_poll_is_kept_and_told_to_the_worker(tmp_path: Path) -> None:
    path = write(tmp_path, edited("lease_ttl_s = 0.5", "lease_ttl_s = 0.5\npoll_s = 4"))
    config = load_config(path)
    assert config.poll_s == 4.0
    told = CommandAdapter(config, trial_dir=tmp_path / "t").worker_env(
        "w1", mutant=None, lease_ttl_s=0.5, http_timeout_s=0.5
    )
    assert told["CRASHPOINT_POLL_S"] == "4.0"
    # Undeclared, the worker is told nothing: it keeps its own.
    unsaid = CommandAdapter(load_config(write(tmp_path, GOOD)), trial_dir=tmp_path / "u")
    assert "CRASHPOINT_POLL_S" not in unsaid.worker_env(
        "w1", mutant=None, lease_ttl_s=0.5, http_timeout_s=0.5
    )


def test_a_declared_term_grace_is_kept(tmp_path: Path) -> None:
    path = write(tmp_path, edited("lease_ttl_s = 0.5", "lease_ttl_s = 0.5\nterm_grace_s = 3"))
    assert load_config(path).term_grace_s == 3.0


def test_the_shipped_examples_load() -> None:
    for path in sorted((ROOT / "examples").glob("*/crashpoint*.toml")):
        assert load_config(path).providers, path


def test_pyproject_tool_crashpoint_holds_the_same_keys(tmp_path: Path) -> None:
    body = GOOD.replace("[target", "[tool.crashpoint.target").replace(
        "[[providers]]", "[[tool.crashpoint.providers]]"
    )
    path = write(tmp_path, '[project]\nname = "mine"\n\n' + body, name="pyproject.toml")
    own = load_config(write(tmp_path, GOOD))
    assert load_config(path) == replace(own, path=path.resolve())


def test_pyproject_mistakes_name_the_tool_table(tmp_path: Path) -> None:
    body = "[tool.crashpoint.target]\nname = 'w'\nwrokers = 2\n"
    message = error_line(write(tmp_path, body, name="pyproject.toml"))
    assert 'tool.crashpoint.target.wrokers is not a known key (did you mean "workers"?)' in message


def test_pyproject_without_the_table(tmp_path: Path) -> None:
    path = write(tmp_path, '[project]\nname = "mine"\n', name="pyproject.toml")
    message = error_line(path)
    assert message.startswith(f"{path}: no [tool.crashpoint] table;")


def test_a_directory_finds_crashpoint_toml_before_pyproject(tmp_path: Path) -> None:
    pyproject = write(
        tmp_path,
        GOOD.replace("[target", "[tool.crashpoint.target").replace(
            "[[providers]]", "[[tool.crashpoint.providers]]"
        ),
        name="pyproject.toml",
    )
    assert find_config(tmp_path) == pyproject
    assert load_config(tmp_path).path == pyproject.resolve()
    own = write(tmp_path, GOOD)
    assert find_config(tmp_path) == own
    assert load_config(tmp_path).path == own.resolve()


def test_a_directory_without_a_config(tmp_path: Path) -> None:
    write(tmp_path, '[project]\nname = "mine"\n', name="pyproject.toml")
    with pytest.raises(ConfigError, match=r"no crashpoint.toml and no \[tool.crashpoint\]"):
        find_config(tmp_path)


# (what is wrong, the edit, the key the line names, a piece of the fix it gives)
MISTAKES = [
    (
        "unknown-key",
        ("lease_ttl_s = 0.5", "lease_tll_s = 0.5"),
        'target.lease_tll_s is not a known key (did you mean "lease_ttl_s"?)',
        "[target] allows name, command, workers, lease_ttl_s, enqueue, max_attempts, status",
    ),
    (
        "unknown-top-level-key",
        ('[[providers]]\nname = "billing"', '[[provider]]\nname = "billing"'),
        'provider is not a known key (did you mean "providers"?)',
        "the top level allows target, providers",
    ),
    (
        "unknown-provider-key",
        ('kind = "plain"', 'kind = "plain"\nurl = "http://x"'),
        "providers[1].url is not a known key",
        "[[providers]] allows name, kind",
    ),
    (
        "wrong-type",
        ("workers = 2", 'workers = "two"'),
        'target.workers must be a whole number, got "two" (a string)',
        "write workers = 2",
    ),
    (
        "wrong-type-lease",
        ("lease_ttl_s = 0.5", 'lease_ttl_s = "1s"'),
        'target.lease_ttl_s must be a number, got "1s" (a string)',
        "write lease_ttl_s = 1.0",
    ),
    (
        "command-not-a-list",
        ('command = ["node", "worker.js"]', 'command = "node worker.js"'),
        'target.command must be a list of strings (an argv), got "node worker.js"',
        'write command = ["node", "worker.js"]',
    ),
    (
        "missing-command",
        ('command = ["node", "worker.js"]\n', ""),
        "target.command is missing",
        'add command = ["node", "worker.js"]',
    ),
    (
        "empty-command",
        ('command = ["node", "worker.js"]', "command = []"),
        "target.command is empty",
        'name the program first: command = ["node", "worker.js"]',
    ),
    (
        "missing-name",
        ('name = "billing-agent"\n', ""),
        "target.name is missing",
        'add name = "billing-agent"',
    ),
    (
        "missing-enqueue",
        ('enqueue = ["node", "enqueue.js", "{job_id}", "{payload_file}"]\n', ""),
        "target.enqueue is missing",
        "add enqueue = ",
    ),
    (
        "unknown-provider-kind",
        ('kind = "idempotent"', 'kind = "exactly-once"'),
        'providers[0].kind is "exactly-once"',
        "use one of idempotent, plain, unqueryable",
    ),
    (
        "duplicate-provider-name",
        ('name = "mailer"', 'name = "billing"'),
        'providers[1].name "billing" is declared twice',
        "give each provider its own name",
    ),
    (
        "provider-names-share-a-variable",
        ('name = "billing"', 'name = "pay-v2"', 'name = "mailer"', 'name = "pay.v2"'),
        'providers[1].name "pay.v2" and "pay-v2" both give the worker '
        "CRASHPOINT_PROVIDER_PAY_V2_URL",
        "rename one so the worker can tell them apart",
    ),
    (
        "provider-name-without-letters",
        ('name = "billing"', 'name = "--"'),
        'providers[0].name "--" has no letter or digit',
        "CRASHPOINT_PROVIDER_<NAME>_URL",
    ),
    (
        "no-providers",
        (GOOD[GOOD.index("[[providers]]") :], ""),
        "providers declares no provider",
        "add a [[providers]] table",
    ),
    (
        "providers-not-an-array",
        (
            GOOD[GOOD.index("[[providers]]") :],
            "",
            "[target]\n",
            'providers = "billing"\n[target]\n',
        ),
        'providers must be an array of tables, got "billing"',
        "[[providers]] table",
    ),
    (
        "bad-placeholder",
        ('"{job_id}", "{payload_file}"', '"{job}", "{payload_file}"'),
        'target.enqueue has unknown placeholder {job} in "{job}"',
        "use {job_id} or {payload_file}",
    ),
    (
        "bad-placeholder-in-status",
        ('"status.js", "{job_id}"', '"status.js", "--id={id}"'),
        'target.status has unknown placeholder {id} in "--id={id}"',
        "use {job_id} or {payload_file}",
    ),
    (
        "placeholder-with-a-format-spec",
        ('"status.js", "{job_id}"', '"status.js", "{job_id:>8}"'),
        "target.status has unknown placeholder {job_id:>8}",
        "use {job_id} or {payload_file}",
    ),
    (
        "unmatched-brace",
        ('"status.js", "{job_id}"', '"status.js", "{job_id"'),
        'target.status has an unmatched brace in "{job_id"',
        "write {{ or }} for a literal brace",
    ),
    (
        "template-without-a-job",
        ('"status.js", "{job_id}"', '"status.js"'),
        "target.status never says which job",
        "pass {job_id} or {payload_file}",
    ),
    (
        "placeholder-in-the-worker-command",
        ('"worker.js"]', '"worker.js", "{job_id}"]'),
        "target.command uses {job_id}, but it is started once per worker, not per job",
        "pass jobs through enqueue instead",
    ),
    (
        "negative-lease",
        ("lease_ttl_s = 0.5", "lease_ttl_s = -1"),
        "target.lease_ttl_s must be seconds from 0.05 to 600, got -1",
        "for example lease_ttl_s = 1.0",
    ),
    (
        "zero-lease",
        ("lease_ttl_s = 0.5", "lease_ttl_s = 0"),
        "target.lease_ttl_s must be seconds from 0.05 to 600, got 0",
        "for example lease_ttl_s = 1.0",
    ),
    (
        "term-grace-zero",
        ("lease_ttl_s = 0.5", "lease_ttl_s = 0.5\nterm_grace_s = 0"),
        "target.term_grace_s must be seconds from 0.05 to 600, got 0",
        "leave it out for two leases",
    ),
    (
        "term-grace-not-a-number",
        ("lease_ttl_s = 0.5", 'lease_ttl_s = 0.5\nterm_grace_s = "2s"'),
        'target.term_grace_s must be a number, got "2s" (a string)',
        "write term_grace_s = 2.0",
    ),
    (
        "poll-zero",
        ("lease_ttl_s = 0.5", "lease_ttl_s = 0.5\npoll_s = 0"),
        "target.poll_s must be seconds from 0.001 to 10, got 0",
        "for example poll_s = 0.5, or leave it out",
    ),
    (
        "poll-past-the-trials-bound",
        ("lease_ttl_s = 0.5", "lease_ttl_s = 0.5\npoll_s = 30"),
        "target.poll_s must be seconds from 0.001 to 10, got 30",
        "write the longest your worker sleeps between looks at its queue",
    ),
    (
        "poll-not-a-number",
        ("lease_ttl_s = 0.5", 'lease_ttl_s = 0.5\npoll_s = "1s"'),
        'target.poll_s must be a number, got "1s" (a string)',
        "write poll_s = 0.5",
    ),
    (
        "min-backoff-zero",
        ("lease_ttl_s = 0.5", "lease_ttl_s = 0.5\nmin_backoff_s = 0"),
        "target.min_backoff_s must be seconds from 0.001 to 10, got 0",
        "for example min_backoff_s = 0.1, or leave it out",
    ),
    (
        "min-backoff-not-a-number",
        ("lease_ttl_s = 0.5", 'lease_ttl_s = 0.5\nmin_backoff_s = "100ms"'),
        'target.min_backoff_s must be a number, got "100ms" (a string)',
        "write min_backoff_s = 0.1",
    ),
    (
        "visibility-zero",
        ("lease_ttl_s = 0.5", "lease_ttl_s = 0.5\nvisibility_s = 0"),
        "target.visibility_s must be seconds from 0.05 to 600, got 0",
        "or leave it out when that is the lease",
    ),
    (
        "pool-not-a-boolean",
        ("lease_ttl_s = 0.5", 'lease_ttl_s = 0.5\npool = "yes"'),
        'target.pool must be true or false, got "yes" (a string)',
        "write pool = true",
    ),
    (
        "upgraded-command-names-a-job",
        ("lease_ttl_s = 0.5", 'lease_ttl_s = 0.5\nupgraded_command = ["w", "{job_id}"]'),
        "target.upgraded_command names a job, but it is started once per worker",
        "pass jobs through enqueue instead",
    ),
    (
        "upgraded-command-not-an-argv",
        ("lease_ttl_s = 0.5", 'lease_ttl_s = 0.5\nupgraded_command = "worker --v2"'),
        "target.upgraded_command must be a list of strings (an argv)",
        "upgraded_command = ",
    ),
    (
        "cancel-never-says-which-job",
        ("lease_ttl_s = 0.5", 'lease_ttl_s = 0.5\ncancel = ["python3", "cancel.py"]'),
        "target.cancel never says which job",
        '{job_id} or {payload_file}, for example cancel = ["node", "cancel.js", "{job_id}"]',
    ),
    (
        "broker-unknown-kind",
        (
            "[target.ledger]",
            '[target.broker]\nkind = "rabbitmq"\nenv = "AMQP_URL"\n[target.ledger]',
        ),
        'target.broker.kind "rabbitmq" is not a broker the harness can start',
        'write kind = "redis"',
    ),
    (
        "broker-without-env",
        ("[target.ledger]", '[target.broker]\nkind = "redis"\n[target.ledger]'),
        "target.broker.env is missing",
        'add env = "REDIS_URL"',
    ),
    (
        "broker-env-of-the-harness",
        (
            "[target.ledger]",
            '[target.broker]\nkind = "redis"\nenv = "CRASHPOINT_STATE_DIR"\n[target.ledger]',
        ),
        'target.broker.env "CRASHPOINT_STATE_DIR" is not a variable the broker\'s URL can go in',
        "not CRASHPOINT_*",
    ),
    (
        "broker-kind-and-commands",
        (
            "[target.ledger]",
            '[target.broker]\nkind = "redis"\nenv = "R"\nstart = ["s"]\nstop = ["s"]\n'
            'url = "u"\n[target.ledger]',
        ),
        "target.broker mixes a kind the harness starts with commands of its own",
        'keep kind = "redis", or give start, stop and url without kind',
    ),
    (
        "broker-commands-without-url",
        (
            "[target.ledger]",
            '[target.broker]\nenv = "R"\nstart = ["s"]\nstop = ["s"]\n[target.ledger]',
        ),
        "target.broker has start, stop but not all of start, stop and url",
        "give start, stop and url without kind",
    ),
    (
        "broker-start-with-signal",
        (
            "[target.ledger]",
            '[target.broker]\nenv = "R"\nstart = ["s", "{signal}"]\nstop = ["s"]\n'
            'url = "u"\n[target.ledger]',
        ),
        'target.broker.start has unknown placeholder {signal} in "{signal}"',
        "use {port}, {data_dir}",
    ),
    (
        "broker-unknown-key",
        (
            "[target.ledger]",
            '[target.broker]\nkind = "redis"\nenv = "R"\nport = 1\n[target.ledger]',
        ),
        "target.broker.port is not a known key",
        "[target.broker] allows kind, env, start, stop, url",
    ),
    (
        "max-attempts-zero",
        ("max_attempts = 6", "max_attempts = 0"),
        "target.max_attempts must be at least 1, got 0",
        "leave the key out when it has none",
    ),
    (
        "max-attempts-not-an-integer",
        ("max_attempts = 6", "max_attempts = 2.5"),
        "target.max_attempts must be a whole number, got 2.5 (a float)",
        "write max_attempts = 3",
    ),
    (
        "too-many-workers",
        ("workers = 2", "workers = 100"),
        "target.workers must be from 1 to 64, got 100",
        "write workers = 2",
    ),
    (
        "workers-a-boolean",
        ("workers = 2", "workers = true"),
        "target.workers must be a whole number, got true (a boolean)",
        "write workers = 2",
    ),
]


@pytest.mark.parametrize(
    ("edits", "says", "fix"),
    [pytest.param(m[1], m[2], m[3], id=m[0]) for m in MISTAKES],
)
def test_each_mistake_is_one_line_naming_file_key_and_fix(
    edits: tuple[str, ...], says: str, fix: str, tmp_path: Path
) -> None:
    text = GOOD
    for old, new in zip(edits[::2], edits[1::2], strict=True):
        assert old in text, old
        text = text.replace(old, new, 1)
    assert_one_line(write(tmp_path, text), says, fix)


def test_the_mistakes_are_distinct() -> None:
    seen = [m[2] for m in MISTAKES]
    assert len(seen) == len(set(seen))
    assert len(seen) >= 14


def test_ledger_dsn_must_be_a_string(tmp_path: Path) -> None:
    path = write(tmp_path, edited('dsn = "sqlite:///state/ledger.db"', "dsn = 5"))
    assert "target.ledger.dsn must be a non-empty string, got 5 (an integer)" in error_line(path)


def test_missing_target_table(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD[GOOD.index("[[providers]]") :])
    assert (
        error_line(path) == f"{path}: target is missing; add a [target] table with name and command"
    )


def test_invalid_toml(tmp_path: Path) -> None:
    path = write(tmp_path, edited("workers = 2", "workers = = 2"))
    message = error_line(path)
    assert message.startswith(f"{path}: not valid TOML (")
    assert "(at line 4, column 11)" in message
    assert message.endswith("; fix the syntax there")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.toml"
    assert error_line(path) == f"{path}: no such file; pass -c with the path to crashpoint.toml"


def test_unreadable_file(tmp_path: Path) -> None:
    # A path through a regular file cannot be opened (ENOTDIR), whoever runs the test;
    # a chmod 000 file would still be readable by root.
    (tmp_path / "plain").write_text("")
    path = tmp_path / "plain" / "crashpoint.toml"
    message = error_line(path)
    assert message == (
        f"{path}: cannot be read (Not a directory); check the path and its permissions"
    )


def test_a_file_that_is_not_text(tmp_path: Path) -> None:
    path = tmp_path / "crashpoint.toml"
    path.write_bytes(b"[target]\nname = '\xff'\n")
    assert error_line(path) == f"{path}: not UTF-8 text (byte 17); save it as UTF-8"


# -- the status command's one line --------------------------------------------------------


def test_a_status_line_with_every_field() -> None:
    line = '{"state": "done", "external_ref": "eff-1", "attempts": 2, "last_error": null}\n'
    assert parse_status_line(line) == JobStatus("done", external_ref="eff-1", attempts=2)
    assert parse_status_line(line).final


@pytest.mark.parametrize("state", ["done", "needs_review", "dead_lettered", "pending"])
def test_each_state_parses(state: str) -> None:
    status = parse_status_line(f'{{"state": "{state}"}}')
    assert status.state == state
    assert status.final is (state != "pending")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "printed nothing, not one JSON line"),
        ("hello\n", 'printed "hello", which is not JSON'),
        ('{"state": "done"}\n{"state": "done"}\n', "printed 2 lines, not one JSON line"),
        ('["done"]', 'printed "[\\"done\\"]", not a JSON object'),
        ('{"state": "finished"}', 'printed state "finished"; it must be one of done,'),
        ("{}", "printed state null"),
        ('{"state": "done", "attempts": -1}', "printed attempts -1"),
        ('{"state": "done", "attempts": true}', "printed attempts true"),
        ('{"state": "done", "external_ref": 7}', "printed external_ref 7; it must be a string"),
        ('{"state": "done", "externalRef": "x"}', 'printed unknown key "externalRef"'),
    ],
    ids=[
        "nothing",
        "not-json",
        "two-lines",
        "not-an-object",
        "unknown-state",
        "no-state",
        "negative-attempts",
        "boolean-attempts",
        "ref-not-a-string",
        "unknown-key",
    ],
)
def test_garbage_status_lines_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=r".") as info:
        parse_status_line(text)
    assert says in str(info.value)
    assert "\n" not in str(info.value)


# -- [target.docker] ----------------------------------------------------------------------

DOCKER = """\
[target.docker]
build = "."
env = { LOG_LEVEL = "debug", REGION = "eu" }
workdir = "/app"
mounts = ["./fixtures:/fixtures:ro", { source = "data", target = "/data" }]
user = "1000:1000"
"""


def docker_dir(tmp_path: Path, table: str = DOCKER) -> Path:
    """A config with ``table`` appended, beside a Dockerfile and the mounted paths."""
    (tmp_path / "Dockerfile").write_text("FROM crashpoint-debian-node:1\n")
    (tmp_path / "fixtures").mkdir(exist_ok=True)
    (tmp_path / "data").mkdir(exist_ok=True)
    return write(tmp_path, GOOD.replace("[[providers]]", table + "\n[[providers]]", 1))


def test_a_full_docker_table_loads(tmp_path: Path) -> None:
    config = load_config(docker_dir(tmp_path))
    root = tmp_path.resolve()
    assert config.docker == DockerConfig(
        build=root,
        env=(("LOG_LEVEL", "debug"), ("REGION", "eu")),
        workdir="/app",
        mounts=(
            Mount(root / "fixtures", "/fixtures", read_only=True),
            Mount(root / "data", "/data", read_only=False),
        ),
        user="1000:1000",
    )


def test_a_docker_image_needs_nothing_else(tmp_path: Path) -> None:
    table = '[target.docker]\nimage = "registry.local:5000/team/billing-worker:1.2"\n'
    config = load_config(docker_dir(tmp_path, table))
    assert config.docker == DockerConfig(image="registry.local:5000/team/billing-worker:1.2")
    assert load_config(write(tmp_path, GOOD)).docker is None


def test_the_docker_table_in_pyproject(tmp_path: Path) -> None:
    own = load_config(docker_dir(tmp_path))
    body = (
        (tmp_path / "crashpoint.toml")
        .read_text()
        .replace("[target", "[tool.crashpoint.target")
        .replace("[[providers]]", "[[tool.crashpoint.providers]]")
    )
    path = write(tmp_path, body, name="pyproject.toml")
    assert load_config(path) == replace(own, path=path.resolve())
    (tmp_path / "Dockerfile").unlink()
    assert "tool.crashpoint.target.docker.build" in error_line(path)


def test_a_build_directory_is_relative_to_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "svc").mkdir()
    (tmp_path / "svc" / "Dockerfile").write_text("FROM scratch\n")
    config = load_config(
        docker_dir(tmp_path / "svc" / ".." / "svc", '[target.docker]\nbuild = "."\n')
    )
    assert config.docker is not None
    assert config.docker.build == (tmp_path / "svc").resolve()


# (what is wrong, the [target.docker] table, the key the line names, a piece of the fix)
DOCKER_MISTAKES = [
    (
        "unknown-key",
        '[target.docker]\nimage = "w:1"\nports = ["8080"]\n',
        "target.docker.ports is not a known key",
        "[target.docker] allows image, build, env, workdir, mounts, user",
    ),
    (
        "both-image-and-build",
        '[target.docker]\nimage = "w:1"\nbuild = "."\n',
        "target.docker sets both image and build",
        "keep image for a local image, or build for a directory with a Dockerfile",
    ),
    (
        "neither-image-nor-build",
        '[target.docker]\nworkdir = "/app"\n',
        "target.docker names no image",
        'add image = "billing-worker:1" or build = "."',
    ),
    (
        "not-a-table",
        'docker = "w:1"\n',
        'target.docker must be a table, got "w:1"',
        "write [target.docker]",
    ),
    (
        "image-not-a-string",
        "[target.docker]\nimage = 1\n",
        "target.docker.image must be a non-empty string, got 1 (an integer)",
        'write image = "billing-worker:1"',
    ),
    (
        "image-not-a-reference",
        '[target.docker]\nimage = "Billing Worker"\n',
        'target.docker.image "Billing Worker" is not an image reference',
        "lower-case name, then :tag",
    ),
    (
        "build-dir-missing",
        '[target.docker]\nbuild = "svc"\n',
        'target.docker.build "svc" is not a directory',
        "name the directory holding the Dockerfile, relative to this file",
    ),
    (
        "build-dir-without-dockerfile",
        '[target.docker]\nbuild = "fixtures"\n',
        'target.docker.build "fixtures" has no Dockerfile',
        "add a Dockerfile there, or name the directory that has one",
    ),
    (
        "relative-workdir",
        '[target.docker]\nbuild = "."\nworkdir = "app"\n',
        'target.docker.workdir "app" is not an absolute path in the container',
        'write workdir = "/app"',
    ),
    (
        "bad-user",
        '[target.docker]\nbuild = "."\nuser = "a b"\n',
        'target.docker.user "a b" is not a user',
        "write a name, uid or uid:gid",
    ),
    (
        "env-not-a-table",
        '[target.docker]\nbuild = "."\nenv = ["A=1"]\n',
        'target.docker.env must be a table of strings, got ["A=1"] (an array)',
        'write env = { LOG_LEVEL = "debug" }',
    ),
    (
        "env-value-not-a-string",
        '[target.docker]\nbuild = "."\nenv = { RETRIES = 3 }\n',
        "target.docker.env.RETRIES must be a string, got 3 (an integer)",
        'quote it: RETRIES = "3"',
    ),
    (
        "env-bad-name",
        '[target.docker]\nbuild = "."\nenv = { "LOG-LEVEL" = "x" }\n',
        'target.docker.env names "LOG-LEVEL", which is not an environment variable',
        "use letters, digits and _",
    ),
    (
        "env-sets-a-harness-variable",
        '[target.docker]\nbuild = "."\nenv = { CRASHPOINT_WORKER_ID = "w9" }\n',
        "target.docker.env.CRASHPOINT_WORKER_ID is set by the harness itself",
        "leave CRASHPOINT_* out",
    ),
    (
        "mounts-not-an-array",
        '[target.docker]\nbuild = "."\nmounts = "./fixtures:/fixtures"\n',
        'target.docker.mounts must be an array, got "./fixtures:/fixtures" (a string)',
        'write mounts = ["./fixtures:/fixtures:ro"]',
    ),
    (
        "mount-without-a-container-path",
        '[target.docker]\nbuild = "."\nmounts = ["./fixtures"]\n',
        'target.docker.mounts[0] "./fixtures" is not host:container[:ro]',
        'write it like "./fixtures:/fixtures:ro"',
    ),
    (
        "mount-with-a-bad-mode",
        '[target.docker]\nbuild = "."\nmounts = ["./fixtures:/fixtures:readonly"]\n',
        'target.docker.mounts[0] "./fixtures:/fixtures:readonly" has mode "readonly"',
        "end it with :ro or :rw",
    ),
    (
        "mount-of-a-missing-host-path",
        '[target.docker]\nbuild = "."\nmounts = ["./nowhere:/data"]\n',
        'target.docker.mounts[0] host path "./nowhere" does not exist',
        "create it, or fix the path",
    ),
    (
        "mount-to-a-relative-path",
        '[target.docker]\nbuild = "."\nmounts = ["./fixtures:fixtures"]\n',
        'target.docker.mounts[0] container path "fixtures" is not absolute',
        "write it from the container's root",
    ),
    (
        "mount-twice-to-one-path",
        '[target.docker]\nbuild = "."\nmounts = ["./fixtures:/d", "./data:/d"]\n',
        'target.docker.mounts[1] mounts "/d" a second time',
        "give each mount its own container path",
    ),
    (
        "mount-table-unknown-key",
        '[target.docker]\nbuild = "."\n'
        'mounts = [{ source = "data", target = "/d", mode = "ro" }]\n',
        "target.docker.mounts[0].mode is not a known key",
        "a mount allows source, target, read_only",
    ),
    (
        "mount-table-read-only-not-a-boolean",
        '[target.docker]\nbuild = "."\n'
        'mounts = [{ source = "data", target = "/d", read_only = "yes" }]\n',
        'target.docker.mounts[0].read_only must be true or false, got "yes" (a string)',
        "write read_only = true",
    ),
    (
        "mount-table-without-a-target",
        '[target.docker]\nbuild = "."\nmounts = [{ source = "data" }]\n',
        "target.docker.mounts[0].target is missing",
        'add target = "/fixtures"',
    ),
    (
        "mount-neither-string-nor-table",
        '[target.docker]\nbuild = "."\nmounts = [7]\n',
        "target.docker.mounts[0] must be a string or a table, got 7",
        'write "host:container[:ro]"',
    ),
]


@pytest.mark.parametrize(
    ("table", "says", "fix"),
    [pytest.param(m[1], m[2], m[3], id=m[0]) for m in DOCKER_MISTAKES],
)
def test_each_docker_mistake_is_one_line_naming_file_key_and_fix(
    table: str, says: str, fix: str, tmp_path: Path
) -> None:
    if not table.startswith("["):  # a key of [target] itself
        path = docker_dir(tmp_path, "")
        path.write_text(path.read_text().replace("[target]\n", "[target]\n" + table, 1))
    else:
        path = docker_dir(tmp_path, table)
    assert_one_line(path, says, fix)


def test_the_docker_mistakes_are_distinct() -> None:
    seen = [m[2] for m in DOCKER_MISTAKES]
    assert len(seen) == len(set(seen))


STEPS = """
[[target.steps]]
name = "charge"
provider = "billing"

[[target.steps]]
name = "receipt"
provider = "mailer"
"""


def with_steps(steps: str) -> str:
    return edited("[target.ledger]", steps.strip() + "\n\n[target.ledger]")


def test_declared_steps_load_in_order(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, with_steps(STEPS)))
    assert config.steps == (("charge", "billing"), ("receipt", "mailer"))
    assert load_config(write(tmp_path, GOOD, "plain.toml")).steps == ()


@pytest.mark.parametrize(
    ("steps", "says", "fix"),
    [
        pytest.param(
            '[[target.steps]]\nname = "charge"\nprovider = "billing"',
            "target.steps must list two steps or more",
            "[[target.steps]]",
            id="one-step",
        ),
        pytest.param(
            STEPS.replace('provider = "mailer"', 'provider = "sms"'),
            'target.steps[1].provider "sms" is not a declared provider',
            "name one of billing, mailer",
            id="undeclared-provider",
        ),
        pytest.param(
            STEPS.replace('provider = "mailer"', 'provider = "billing"'),
            'target.steps[1].provider "billing" already has a step',
            "a provider of its own",
            id="shared-provider",
        ),
        pytest.param(
            STEPS.replace('"receipt"', '"charge"'),
            'target.steps[1].name "charge" is not a new name',
            "its own name",
            id="twice",
        ),
        pytest.param(
            STEPS.replace('"receipt"', '"re.ceipt"'),
            "target.steps[1].name",
            "its own name",
            id="dot-in-name",
        ),
        pytest.param(
            STEPS.replace('provider = "mailer"', 'provider = "mailer"\nretries = 2'),
            "target.steps[1].retries is not a known key",
            "[[target.steps]] allows name, provider",
            id="unknown-key",
        ),
    ],
)
def test_each_steps_mistake_is_one_line(tmp_path: Path, steps: str, says: str, fix: str) -> None:
    assert_one_line(write(tmp_path, with_steps(steps)), says, fix)


def test_an_mcp_provider_declares_its_transport_and_hints(tmp_path: Path) -> None:
    text = edited(
        'name = "mailer"\nkind = "plain"\n',
        'name = "mailer"\nkind = "plain"\ntransport = "mcp"\n'
        "tool_hints = { idempotentHint = true }\n",
    )
    billing, mailer = load_config(write(tmp_path, text)).providers
    assert billing == ProviderDecl("billing", "idempotent")
    assert billing.start_options() == {}
    assert mailer == ProviderDecl("mailer", "plain", "mcp", (("idempotentHint", True),))
    assert mailer.start_options() == {"transport": "mcp", "tool_hints": {"idempotentHint": True}}


@pytest.mark.parametrize(
    ("extra", "says", "fix"),
    [
        ('transport = "grpc"', 'providers[1].transport is "grpc"', 'use one of "http", "mcp"'),
        (
            "tool_hints = { idempotentHint = true }",
            "providers[1].tool_hints is set on a provider without",
            'add transport = "mcp"',
        ),
        (
            'transport = "mcp"\ntool_hints = { sideEffectHint = true }',
            "providers[1].tool_hints.sideEffectHint is not an MCP tool annotation",
            "use readOnlyHint, destructiveHint, idempotentHint, openWorldHint",
        ),
        (
            'transport = "mcp"\ntool_hints = { idempotentHint = "yes" }',
            "providers[1].tool_hints.idempotentHint must be true or false",
            "write idempotentHint = true",
        ),
        (
            'transport = "mcp"\ntool_hints = true',
            "providers[1].tool_hints must be a table",
            "write tool_hints = { idempotentHint = true }",
        ),
    ],
)
def test_each_transport_mistake_is_one_line(
    tmp_path: Path, extra: str, says: str, fix: str
) -> None:
    text = edited(
        'name = "mailer"\nkind = "plain"\n', f'name = "mailer"\nkind = "plain"\n{extra}\n'
    )
    assert_one_line(write(tmp_path, text), says, fix)


def test_sensitive_fields_load_and_default_to_none(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, GOOD)).sensitive_fields == ()
    text = GOOD.replace("max_attempts = 6", 'max_attempts = 6\nsensitive_fields = ["email", "ssn"]')
    assert load_config(write(tmp_path, text)).sensitive_fields == ("email", "ssn")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ('"email"', "must be a list of field names"),
        ("[1]", "must be a list of field names"),
        ('["a b"]', "is not a field name"),
        ('["job_id"]', "a field the harness owns"),
        ('["email", "email"]', "names a field twice"),
    ],
)
def test_sensitive_fields_mistakes_name_the_key(tmp_path: Path, value: str, says: str) -> None:
    text = GOOD.replace("max_attempts = 6", f"max_attempts = 6\nsensitive_fields = {value}")
    with pytest.raises(ConfigError, match=r"target\.sensitive_fields") as err:
        load_config(write(tmp_path, text))
    assert says in str(err.value)
    assert "\n" not in str(err.value)
