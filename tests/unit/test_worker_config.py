"""The worker's environment contract."""

from __future__ import annotations

import os
import site
from pathlib import Path

import pytest

import scenarios
from harness.contract.env import provider_env_var
from harness.contract.errors import ConfigError
from scenarios import ReferenceTarget
from scenarios.worker.config import ProviderSpec, WorkerConfig, version_flag


def test_from_env_reads_every_variable() -> None:
    cfg = WorkerConfig.from_env(
        {
            "CRASHPOINT_LEDGER_DSN": "sqlite:///ledger.db",
            "CRASHPOINT_WORKER_ID": "w3",
            "CRASHPOINT_PROVIDER_BILLING_URL": "http://127.0.0.1:9/",
            "CRASHPOINT_PROVIDER_BILLING_KIND": "plain",
            "CRASHPOINT_PROVIDER_MAIL_OUT_URL": "http://127.0.0.1:10",
            "CRASHPOINT_RECOVERY": "1",
            "CRASHPOINT_MUTANT": "uncapped_retries",
            "CRASHPOINT_LEASE_TTL_S": "0.5",
            "CRASHPOINT_HTTP_TIMEOUT_S": "0.25",
            "CRASHPOINT_MAX_ATTEMPTS": "5",
            "CRASHPOINT_POLL_S": "0.01",
            "CRASHPOINT_BACKOFF_S": "0.1",
            "CRASHPOINT_LEDGER_SCHEMA": "s1",
        }
    )
    assert cfg.worker_id == "w3"
    assert cfg.provider("billing") == ProviderSpec("plain", "http://127.0.0.1:9")
    assert cfg.provider("mail-out") == ProviderSpec("idempotent", "http://127.0.0.1:10")
    assert cfg.recovery
    assert cfg.mutant == "uncapped_retries"
    assert (cfg.lease_ttl_s, cfg.http_timeout_s, cfg.max_attempts) == (0.5, 0.25, 5)
    assert (cfg.poll_s, cfg.backoff_s, cfg.ledger_schema) == (0.01, 0.1, "s1")


def test_defaults() -> None:
    cfg = WorkerConfig.from_env({"CRASHPOINT_LEDGER_DSN": "sqlite:///l.db"})
    assert (cfg.lease_ttl_s, cfg.http_timeout_s, cfg.max_attempts) == (1.0, 2.0, 3)
    assert (cfg.poll_s, cfg.backoff_s, cfg.recovery, cfg.mutant) == (0.02, 0.2, False, None)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "CRASHPOINT_LEDGER_DSN is not set"),
        ({"CRASHPOINT_MUTANT": "nope"}, "CRASHPOINT_MUTANT='nope' is unknown"),
        ({"CRASHPOINT_LEASE_TTL_S": "soon"}, "CRASHPOINT_LEASE_TTL_S='soon' is not a number"),
        ({"CRASHPOINT_POLL_S": "0"}, "must be positive"),
        (
            {"CRASHPOINT_PROVIDER_X_URL": "http://h", "CRASHPOINT_PROVIDER_X_KIND": "magic"},
            "CRASHPOINT_PROVIDER_X_KIND='magic' is unknown",
        ),
    ],
)
def test_bad_configuration_names_the_variable(env: dict[str, str], message: str) -> None:
    if env:
        env = {"CRASHPOINT_LEDGER_DSN": "sqlite:///l.db", **env}
    with pytest.raises(ConfigError, match=message):
        WorkerConfig.from_env(env)


def test_reference_target_env_round_trips(tmp_path: object) -> None:
    target = ReferenceTarget("sqlite:///ledger.db", state_dir=str(tmp_path))
    env = target.worker_env(
        "w1",
        mutant="ack_before_effect",
        providers={"billing": ("idempotent", "http://127.0.0.1:1")},
        recovery=True,
        lease_ttl_s=0.3,
        max_attempts=4,
    )
    cfg = WorkerConfig.from_env(env)
    assert cfg.ledger_dsn == f"sqlite:///{tmp_path}/ledger.db"
    assert cfg.provider("billing") == ProviderSpec("idempotent", "http://127.0.0.1:1")
    assert (cfg.mutant, cfg.recovery, cfg.lease_ttl_s, cfg.max_attempts) == (
        "ack_before_effect",
        True,
        0.3,
        4,
    )
    # Started without site (-S): the paths site would have added come in PYTHONPATH.
    assert target.worker_argv()[1:] == ["-S", "-m", "scenarios.worker"]
    path = env["PYTHONPATH"].split(os.pathsep)
    assert str(Path(scenarios.__file__).resolve().parent.parent) in path
    assert set(site.getsitepackages()) <= set(path)


@pytest.mark.parametrize("name", ["pay--v2", "crm.v2", "mail-out", "Billing_EU", "a..b--c"])
def test_harness_and_worker_agree_on_a_providers_variables(name: str, tmp_path: Path) -> None:
    # The harness names the variables (the launcher and the reference target both call
    # provider_env_var); the worker finds them again by the job's provider name.
    target = ReferenceTarget("sqlite:///ledger.db", state_dir=str(tmp_path))
    env = target.worker_env("w1", providers={name: ("plain", "http://127.0.0.1:9")})
    assert provider_env_var(name) in env
    assert WorkerConfig.from_env(env).provider(name) == ProviderSpec("plain", "http://127.0.0.1:9")


def test_the_version_comes_from_the_flag_or_the_environment() -> None:
    env = {"CRASHPOINT_LEDGER_DSN": "sqlite:///ledger.db"}
    assert WorkerConfig.from_env(version_flag([], env)).version == 1
    assert WorkerConfig.from_env(version_flag(["--version", "2"], env)).version == 2
    assert WorkerConfig.from_env({**env, "CRASHPOINT_WORKER_VERSION": "2"}).version == 2
    with pytest.raises(ConfigError, match="CRASHPOINT_WORKER_VERSION='3' is unknown"):
        WorkerConfig.from_env(version_flag(["--version", "3"], env))
    with pytest.raises(ConfigError, match="the only one is --version 2"):
        version_flag(["--fast"], env)
