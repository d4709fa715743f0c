"""A trial's provider processes: started side by side (or leased from the run's warm
pool) and given back when the trial ends."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fake_providers import ProviderPool, ProviderProcess, start_provider
from harness.contract.env import provider_env_name


def start_providers(
    declared: Mapping[str, str],
    trial_dir: Path,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    pool: ProviderPool | None = None,
) -> dict[str, ProviderProcess]:
    """Start one provider process per declared ``name -> kind``, side by side (each start
    is a process launch; in sequence they would add up on every trial). ``options`` adds
    start options by name (an MCP tool server's transport). With ``pool``, each is leased
    from it (fresh, warm if one was given back) instead; give them back with
    :func:`release_providers`."""

    def start(name: str) -> ProviderProcess:
        extra = dict((options or {}).get(name, {}))
        if pool is not None:
            return pool.lease(declared[name], name=name, **extra)
        state = trial_dir / f"provider-{provider_env_name(name).lower()}.db"
        return start_provider(declared[name], state_path=state, name=name, **extra)

    if len(declared) == 1:
        return {name: start(name) for name in declared}
    with ThreadPoolExecutor(max_workers=len(declared)) as threads:
        futures = {name: threads.submit(start, name) for name in declared}
    started = {n: f.result() for n, f in futures.items() if f.exception() is None}
    errors = [e for e in (f.exception() for f in futures.values()) if e is not None]
    if errors:
        release_providers(started, pool)
        raise errors[0]
    return started


def release_providers(
    providers: Mapping[str, ProviderProcess], pool: ProviderPool | None = None
) -> None:
    """Close each provider, or give it back to ``pool`` (which wipes it, or closes one
    that died, was restarted, or cannot be wiped)."""
    for provider in providers.values():
        with contextlib.suppress(Exception):
            if pool is not None:
                pool.give_back(provider)
            else:
                provider.close()
