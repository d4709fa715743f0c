"""The network-fault seam: what a trial and its drivers ask of a trial's network.

:class:`~harness.network.trial.TrialNetwork` is the Toxiproxy implementation. Importing
anything from :mod:`harness.network` loads the Toxiproxy client (``requests`` and all,
tens of milliseconds), which only network runs should pay for: the engine names this
seam under ``TYPE_CHECKING``, and this module imports nothing at run time itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from harness.history import History

#: The two links a trial can fault: worker to provider, worker to ledger database.
Link = Literal["provider", "ledger"]


class NetworkSeam(Protocol):
    """Faults on the links of one trial, made once its provider and ledger are up."""

    @property
    def provider_url(self) -> str | None:
        """The provider's URL through the fault proxy (None until attached)."""

    def attach(self, *, history: History, provider_url: str, ledger_dsn: str | None) -> None:
        """Put proxies in front of the provider and, where it is networked, the ledger."""

    def ledger_dsn(self, dsn: str) -> str:
        """``dsn`` pointed through the ledger proxy (unchanged when there is none)."""

    def on(
        self, which: Link, toxic: str, *, stream: str = "downstream", **attributes: float
    ) -> str:
        """Add a toxic of type ``toxic`` on a link; returns the name to take it off by."""

    def off(self, which: Link, toxic: str) -> None:
        """Take off the toxic :meth:`on` named."""

    def down(self, which: Link = "provider") -> None:
        """Cut a link: open connections drop and new ones are refused."""

    def up(self, which: Link = "provider") -> None:
        """Restore a link :meth:`down` cut."""

    def failure(self) -> str | None:
        """Why the fault proxies themselves went away during the trial (their server
        died), or None: a trial without its proxies tells nothing about the worker."""

    def close(self) -> None:
        """Delete the trial's proxies."""
