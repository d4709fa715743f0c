"""crashpoint: failure injection for job workers that cause external side effects.

The public API is re-exported here lazily: ``import harness`` (or any module of
:mod:`harness.contract`, which a worker imports for its failpoint client) loads no
engine module until a name below is first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness.contract.vocabulary import VERSION as __version__

if TYPE_CHECKING:
    from harness.contract.errors import (
        ConfigError,
        CrashpointError,
        Inconclusive,
        InfrastructureError,
        LedgerError,
        ProviderError,
        RendezvousTimeout,
        ToxiproxyUnavailable,
    )
    from harness.contract.vocabulary import ExitCode, Verdict
    from harness.history import Event, History
    from harness.scenario_api import ProviderHold, ScenarioTrial, ScenarioVerdict, scenario_trial

_LAZY = {
    "ConfigError": "harness.contract.errors",
    "CrashpointError": "harness.contract.errors",
    "Inconclusive": "harness.contract.errors",
    "InfrastructureError": "harness.contract.errors",
    "LedgerError": "harness.contract.errors",
    "ProviderError": "harness.contract.errors",
    "RendezvousTimeout": "harness.contract.errors",
    "ToxiproxyUnavailable": "harness.contract.errors",
    "ExitCode": "harness.contract.vocabulary",
    "Verdict": "harness.contract.vocabulary",
    "Event": "harness.history",
    "History": "harness.history",
    "ProviderHold": "harness.scenario_api",
    "ScenarioTrial": "harness.scenario_api",
    "ScenarioVerdict": "harness.scenario_api",
    "scenario_trial": "harness.scenario_api",
}

__all__ = [
    "ConfigError",
    "CrashpointError",
    "Event",
    "ExitCode",
    "History",
    "Inconclusive",
    "InfrastructureError",
    "LedgerError",
    "ProviderError",
    "ProviderHold",
    "RendezvousTimeout",
    "ScenarioTrial",
    "ScenarioVerdict",
    "ToxiproxyUnavailable",
    "Verdict",
    "__version__",
    "scenario_trial",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
