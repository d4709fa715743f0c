"""The provider-control seam: what the engine asks of a fake provider while a trial runs.

:class:`~fake_providers.client.ProviderClient` is the implementation; the engine relies on
these calls and nothing else of it, so a trial and its drivers are typed against
this protocol and any provider with the same control API can stand in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from fake_providers.client import ProviderClient
    from fake_providers.models import Arrival, Effect, Fault, Held


class ProviderControl(Protocol):
    """Arm faults, meet held requests, and read a provider's ground truth."""

    def arm(self, fault: Fault) -> str:
        """Arm ``fault`` for the next matching request(s); returns its fault id."""

    def wait_held(self, fault_id: str, timeout_s: float, *, after: int = 0) -> Held:
        """Block until a request past arrival ``after`` is held under ``fault_id``, or was
        until its deadline let it go (RendezvousTimeout if not)."""

    def wait_held_count(
        self, fault_id: str, count: int, timeout_s: float, *, after: int = 0
    ) -> list[Held]:
        """Block until ``count`` requests were held under a ``times >= count`` hold."""

    def release(
        self,
        fault_id: str,
        outcome: str = "commit",
        *,
        arrival_id: int | None = None,
        by: float | None = None,
    ) -> int:
        """Let held request(s) go (one, by ``arrival_id``): ``commit`` (or ``respond``) or
        ``drop``; how many (0: let go already, by their deadline). With ``by`` (monotonic),
        the provider lets them go by then itself."""

    def disarm_all(self) -> None:
        """Disarm every fault still armed."""

    def set_identity(self, identity: str, state: str, *, now_acts_as: str | None = None) -> None:
        """Refuse requests under ``identity`` from now on (``expired``, ``changed``), or
        serve them again (``valid``)."""

    def arrivals(self) -> list[Arrival]:
        """Every request the provider received, in order."""

    def effects(self) -> list[Effect]:
        """Every committed effect, in commit order."""


if TYPE_CHECKING:
    _conforms: type[ProviderControl] = ProviderClient  # mypy holds the client to the seam
