"""Fake providers: real HTTP services that record every side effect durably.

Three kinds (``idempotent``, ``plain``, ``unqueryable``) run as child processes; the
harness arms faults and reads the ground truth through ``ProviderClient``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fake_providers.models import KINDS, Arrival, Effect, Fault, Held

if TYPE_CHECKING:
    from fake_providers.client import ProviderClient
    from fake_providers.launcher import ProviderProcess, start_provider
    from fake_providers.pool import ProviderPool

__all__ = [
    "KINDS",
    "Arrival",
    "Effect",
    "Fault",
    "Held",
    "ProviderClient",
    "ProviderPool",
    "ProviderProcess",
    "start_provider",
]

_LAZY = {
    "ProviderClient": "fake_providers.client",
    "ProviderPool": "fake_providers.pool",
    "ProviderProcess": "fake_providers.launcher",
    "start_provider": "fake_providers.launcher",
}


def __getattr__(name: str) -> Any:
    # The server process imports this package too; importing httpx here would add
    # ~80 ms to every provider start, so the client side loads on first use.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fake_providers' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
