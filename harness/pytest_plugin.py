"""pytest plugin (registered through the ``pytest11`` entry point).

Adds ``--crashpoint-require-infra``: when set (CI sets it), a process-tier test whose
server is missing fails instead of skipping, so a green run cannot hide a missing install.
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("crashpoint")
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


def require_infra(config: pytest.Config) -> bool:
    return bool(
        config.getoption("crashpoint_require_infra") or config.getini("crashpoint_require_infra")
    )


def missing(config: pytest.Config, what: str) -> None:
    """Skip (or, when infrastructure is required, fail) because ``what`` is missing."""
    if require_infra(config):
        pytest.fail(f"required infrastructure missing: {what}", pytrace=False)
    pytest.skip(f"missing: {what}")
