"""One trial's network: Toxiproxy proxies in front of its provider and its ledger.

A :class:`TrialNetwork` is made per network cell; :meth:`attach` creates the proxies once
the provider is up (the worker is then given the proxied URL and, for ledger faults, a
proxied PostgreSQL DSN) and :meth:`close` deletes them, so parallel trials share one
server without sharing a proxy.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from harness.contract.errors import ConfigError
from harness.history import History
from harness.network.faults import NetworkFaults, ProxyHandle
from harness.network.seam import Link, NetworkSeam
from harness.network.server import ToxiproxyServer
from harness.plan import Cell


class TrialNetwork:
    def __init__(self, server: ToxiproxyServer, cell: Cell) -> None:
        self.server = server
        self.cell = cell
        self.tag = uuid.uuid4().hex[:8]
        self.generation = server.generation
        self.faults: NetworkFaults | None = None
        self.provider: ProxyHandle | None = None
        self.ledger: ProxyHandle | None = None

    @property
    def provider_url(self) -> str | None:
        return self.provider.url if self.provider is not None else None

    def attach(self, *, history: History, provider_url: str, ledger_dsn: str | None) -> None:
        self.faults = NetworkFaults(self.server, history=history)
        self.provider = self.faults.proxy(f"provider-{self.tag}", provider_url)
        if ledger_dsn is not None and ledger_dsn.startswith("postgresql"):
            parts = urlsplit(ledger_dsn)
            upstream = f"{parts.hostname or '127.0.0.1'}:{parts.port or 5432}"
            self.ledger = self.faults.proxy(f"ledger-{self.tag}", upstream)

    def ledger_dsn(self, dsn: str) -> str:
        """``dsn`` with its host and port replaced by the ledger proxy's."""
        if self.ledger is None:
            return dsn
        parts = urlsplit(dsn)
        auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        netloc = f"{auth}{self.ledger.host}:{self.ledger.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    def on(
        self, which: Link, toxic: str, *, stream: str = "downstream", **attributes: float
    ) -> str:
        """Add a toxic on the ``provider`` or ``ledger`` proxy; returns its name."""
        faults, proxy = self._link(which)
        return faults.add_toxic(proxy, toxic, attributes, stream=stream)

    def off(self, which: Link, toxic: str) -> None:
        faults, proxy = self._link(which)
        faults.remove_toxic(proxy, toxic)

    def down(self, which: Link = "provider") -> None:
        faults, proxy = self._link(which)
        faults.disable(proxy)

    def up(self, which: Link = "provider") -> None:
        faults, proxy = self._link(which)
        faults.enable(proxy)

    def failure(self) -> str | None:
        if self.server.generation != self.generation:
            return f"the Toxiproxy server died mid-trial ({self.server.last_death})"
        if not self.server.alive():
            return f"the Toxiproxy server died mid-trial ({self.server.exit_status()})"
        return None

    def close(self) -> None:
        if self.faults is not None:
            with contextlib.suppress(Exception):
                self.faults.close()

    def _link(self, which: Link) -> tuple[NetworkFaults, ProxyHandle]:
        assert self.faults is not None, "attach() the trial's network before faulting it"
        proxy = self.provider if which == "provider" else self.ledger
        if proxy is None:
            raise ConfigError(
                f"no {which} proxy in this trial: only a networked ledger (postgresql://) "
                f"can be faulted, and cell {self.cell.id} has none; run it with --ledger postgres"
            )
        return self.faults, proxy


if TYPE_CHECKING:
    _conforms: type[NetworkSeam] = TrialNetwork  # mypy holds TrialNetwork to the seam
