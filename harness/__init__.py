"""crashpoint: failure injection for job workers that cause external side effects."""

from __future__ import annotations

from harness.errors import (
    ConfigError,
    CrashpointError,
    InfrastructureError,
    ProviderError,
    RendezvousTimeout,
    ToxiproxyUnavailable,
)
from harness.history import Event, History

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "CrashpointError",
    "Event",
    "History",
    "InfrastructureError",
    "ProviderError",
    "RendezvousTimeout",
    "ToxiproxyUnavailable",
    "__version__",
]
