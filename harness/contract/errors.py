"""The one exception tree of crashpoint.

    CrashpointError
    ├── ConfigError          bad configuration or usage (CLI exit 2)
    ├── InfrastructureError  a server, engine or binary the run needs is missing or broke (exit 3)
    │   └── ToxiproxyUnavailable
    ├── Inconclusive         a trial could not decide (fault never reached, no quiescence)
    ├── RendezvousTimeout    a worker never reached the boundary a trial waits for
    ├── ProviderError        a fake provider answered its control API unexpectedly
    └── LedgerError          the reference ledger refused an operation

Every message says what happened, shows the value, and says what to do.
"""

from __future__ import annotations


class CrashpointError(Exception):
    """Root of every error crashpoint raises on purpose."""


class ConfigError(CrashpointError):
    """Configuration or usage is wrong; the message names the file and key."""


class InfrastructureError(CrashpointError):
    """Something the run depends on (a server, an engine, a binary) is missing or broke."""


class ToxiproxyUnavailable(InfrastructureError):
    """No Toxiproxy server could be found, started or built."""


class Inconclusive(CrashpointError):
    """The trial could not decide (the fault was never reached, or no quiescence)."""


class RendezvousTimeout(CrashpointError):
    """A worker did not reach the awaited failpoint or provider hold in time."""


class ProviderError(CrashpointError):
    """A fake provider's control or oracle API answered unexpectedly."""


class LedgerError(CrashpointError):
    """The reference ledger refused an operation (a key collision between two jobs)."""


class LedgerLinkLost(CrashpointError):
    """The reference ledger's server dropped the connection mid-statement (a restart):
    what that statement did is unknown, so the trial that needed it proves nothing."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (a cancelled CI job, a stopped container), raised in the main thread as
    Ctrl-C is, so the same teardown runs. Not a :class:`CrashpointError`: nothing went
    wrong, the run was told to stop."""
