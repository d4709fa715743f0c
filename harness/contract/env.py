"""The ``CRASHPOINT_*`` environment names, in one place for both sides of the process line.

The harness sets them; a worker (ours or anyone's, in any language) reads them. Deriving
a provider's variable twice once let the two sides disagree for a provider named
``pay--v2``: :func:`provider_env_var` is the only derivation.
"""

from __future__ import annotations

import re

FAILPOINTS = "CRASHPOINT_FAILPOINTS"
WORKER_ID = "CRASHPOINT_WORKER_ID"
STATE_DIR = "CRASHPOINT_STATE_DIR"
RECOVERY = "CRASHPOINT_RECOVERY"
#: The reference worker's own settings (a command target's worker reads none of these).
LEDGER_DSN = "CRASHPOINT_LEDGER_DSN"
#: The PostgreSQL server for the PostgreSQL ledger tier.
PG_DSN = "CRASHPOINT_PG_DSN"
#: How the process backend contains a worker's tree: ``auto`` (cgroup v2 where it can be
#: written, else process groups), ``cgroup2`` (required) or ``process_group`` (forced).
CONTAINMENT = "CRASHPOINT_CONTAINMENT"
#: Where ``scripts/install-infra.sh`` leaves its PostgreSQL: the default of ``--pg-dsn``.
DEFAULT_PG_DSN = "postgresql://crashpoint:crashpoint@127.0.0.1:5432/crashpoint"

_PROVIDER_PREFIX = "CRASHPOINT_PROVIDER_"
_NOT_NAME = re.compile(r"[^A-Z0-9]+")
PROVIDER_URL_VAR = re.compile(r"^CRASHPOINT_PROVIDER_(?P<name>[A-Z0-9_]+)_URL$")


def provider_env_name(name: str) -> str:
    """The ``<NAME>`` of ``CRASHPOINT_PROVIDER_<NAME>_URL``: upper case, and every run of
    other characters one underscore (``pay--v2`` and ``pay.v2`` are both ``PAY_V2``)."""
    return _NOT_NAME.sub("_", name.upper()).strip("_")


def provider_env_var(name: str) -> str:
    """The variable a worker reads a provider's URL from."""
    return f"{_PROVIDER_PREFIX}{provider_env_name(name)}_URL"


def provider_kind_var(name: str) -> str:
    """The variable that tells a worker the provider's kind (idempotent, plain, ...)."""
    return f"{_PROVIDER_PREFIX}{provider_env_name(name)}_KIND"
