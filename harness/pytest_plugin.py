"""pytest plugin (registered through the ``pytest11`` entry point); docs/pytest.md.

- ``--crashpoint[=PATH|reference]`` collects one item per matrix cell of the target
  (``SCENARIO[POINT-PROVIDER-SIGNAL]``) and writes one report per session.
- The ``crashpoint`` fixture is a custom scenario: a fresh trial of the session's target,
  driven step by step, judged by the same oracle (:mod:`harness.scenario_api`).
- ``--crashpoint-require-infra``: when set (CI sets it), a process-tier test whose server
  is missing fails instead of skipping, so a green run cannot hide a missing install.

Every option can also be set in ``[tool.pytest.ini_options]``. This module imports only
pytest and the contract package: a session that uses neither the flag nor the fixture
loads no engine module and starts nothing (the engine lives in ``harness.pytest_session``,
imported when the feature is used).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from harness.contract.vocabulary import PROVIDER_KINDS

if TYPE_CHECKING:
    from harness.scenario_api import ScenarioTrial

#: ``workeroutput`` key of a worker's shard (``harness.pytest_session.SHARD_KEY``).
_SHARD_KEY = "crashpoint_shard"
#: ``--crashpoint`` given without a value (``harness.pytest_options.AUTO``).
_AUTO = "auto"

#: (option, ini key, help) of the options that take one value.
_VALUES = (
    (
        "--crashpoint-config",
        "crashpoint_config",
        "the target of the fixture and of a bare "
        "--crashpoint: a crashpoint.toml (or a directory with one), or 'reference'",
    ),
    (
        "--crashpoint-ledger",
        "crashpoint_ledger",
        "the reference worker's ledger: sqlite (default) or postgres",
    ),
    ("--crashpoint-backend", "crashpoint_backend", "how workers run: process (default) or docker"),
    (
        "--crashpoint-seed",
        "crashpoint_seed",
        "the run seed (default: random; each trial's seed follows from it)",
    ),
    (
        "--crashpoint-lease-ttl-s",
        "crashpoint_lease_ttl_s",
        "the workers' lease in seconds (default: the target's)",
    ),
    (
        "--crashpoint-out",
        "crashpoint_out",
        "the session's run directory: results.json, "
        "index.html, junit.xml, summary.md (default: crashpoint-out)",
    ),
    (
        "--crashpoint-inconclusive",
        "crashpoint_inconclusive",
        "what an inconclusive cell is: fail (default) or skip",
    ),
)
#: (option, ini key, help) of the filters, each given once per value.
_FILTERS = (
    ("--crashpoint-scenario", "crashpoint_scenarios", "only this scenario"),
    ("--crashpoint-point", "crashpoint_points", "only this injection point"),
    (
        "--crashpoint-provider",
        "crashpoint_providers",
        f"only this provider kind ({', '.join(PROVIDER_KINDS)})",
    ),
    ("--crashpoint-signal", "crashpoint_signals", "only this signal (SIGKILL, SIGTERM, SIGSTOP)"),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("crashpoint", "crashpoint: failure injection for job workers")
    group.addoption(
        "--crashpoint",
        nargs="?",
        const=_AUTO,
        default=None,
        metavar="PATH|reference",
        help="collect one test per matrix cell of the target (default: crashpoint_config, "
        "else crashpoint.toml or [tool.crashpoint] found in the rootdir)",
    )
    for option, ini, text in _VALUES:
        group.addoption(option, dest=ini, default=None, help=text)
        parser.addini(ini, f"same as {option}", type="string", default="")
    for option, ini, text in _FILTERS:
        group.addoption(option, dest=ini[:-1], action="append", default=None, help=text)
        parser.addini(ini, f"same as {option}, one per line", type="linelist", default=[])
    group.addoption(
        "--crashpoint-pg-dsn",
        dest="crashpoint_pg_dsn",
        default=os.environ.get("CRASHPOINT_PG_DSN"),
        help="the PostgreSQL for --crashpoint-ledger postgres (default: $CRASHPOINT_PG_DSN)",
    )
    group.addoption(
        "--crashpoint-require-infra",
        action="store_true",
        default=os.environ.get("CRASHPOINT_REQUIRE_INFRA") == "1",
        help="fail, rather than skip, tests whose Toxiproxy, PostgreSQL or Docker is missing",
    )
    parser.addini(
        "crashpoint_require_infra",
        "same as --crashpoint-require-infra",
        type="bool",
        default=False,
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "crashpoint(provider=None, network=False, description=None): how the crashpoint "
        "fixture sets up its trial",
    )
    config.addinivalue_line("markers", "crashpoint_cell: a matrix cell collected by --crashpoint")
    if config.getoption("crashpoint") is not None:
        from harness.pytest_session import activate

        activate(config)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist controller: a worker that ran trials names its shard; merged at the end."""
    shard = getattr(node, "workeroutput", {}).get(_SHARD_KEY)
    if shard:
        from harness.pytest_session import add_shard

        add_shard(node.config, shard)


@pytest.fixture
def crashpoint(request: pytest.FixtureRequest) -> Iterator[ScenarioTrial]:
    """A custom scenario: a started trial of the session's target (docs/pytest.md).

    Enqueue jobs, start workers, hold them at failpoints or the provider, crash or signal
    them, apply toxics, then ``check()`` for the verdict; the trial, its history and its
    page go into the session's report.
    """
    from harness.pytest_session import scenario_fixture

    yield from scenario_fixture(request)


def require_infra(config: pytest.Config) -> bool:
    return bool(
        config.getoption("crashpoint_require_infra") or config.getini("crashpoint_require_infra")
    )


def missing(config: pytest.Config, what: str) -> None:
    """Skip (or, when infrastructure is required, fail) because ``what`` is missing."""
    if require_infra(config):
        pytest.fail(f"required infrastructure missing: {what}", pytrace=False)
    pytest.skip(f"missing: {what}")
