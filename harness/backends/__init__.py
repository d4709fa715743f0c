"""How a worker runs: the ``Backend`` seam and its implementations.

``process`` (a subprocess in its own session, signals to the whole tree) and ``docker``
(one container per worker, ``kill(signal=...)``, ``pause()``/``unpause()``).
"""

from __future__ import annotations

from harness.backends.base import Backend, WorkerHandle, describe_exit
from harness.history import History
from harness.watchdog import Watchdog

__all__ = ["Backend", "WorkerHandle", "describe_exit", "get_backend"]


def get_backend(
    name: str, *, history: History | None = None, watchdog: Watchdog | None = None
) -> Backend:
    """The backend called ``name``: ``process`` or ``docker``."""
    if name == "process":
        from harness.backends.process import ProcessBackend

        return ProcessBackend(history=history, watchdog=watchdog)
    if name == "docker":
        from harness.backends.docker import DockerBackend

        return DockerBackend(history=history, watchdog=watchdog)
    from harness.contract.errors import ConfigError

    raise ConfigError(f"unknown backend {name!r}; choose 'process' or 'docker'")
