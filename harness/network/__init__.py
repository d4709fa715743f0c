"""Network faults through Toxiproxy.

    discovery  find a server (the design's order) or build the pinned one
    api        the one module that talks to toxiproxy-python, its limits kept inside
    server     a Toxiproxy server process, or the running one TOXIPROXY_URL names
    faults     proxies and toxics on a server, recorded in a trial's history
    trial      one trial's provider and ledger links (:class:`TrialNetwork`)
    seam       the protocol trials and drivers use (:class:`NetworkSeam`), import-free

Engine modules that only name the seam import it under ``TYPE_CHECKING`` (see ``seam``).
"""

from harness.network.discovery import (
    INSTALL_HINT,
    TOXIPROXY_VERSION,
    ToxiproxyLocation,
    cached_binary,
    find_toxiproxy,
)
from harness.network.faults import NetworkFaults, ProxyHandle
from harness.network.seam import Link, NetworkSeam
from harness.network.server import ToxiproxyServer
from harness.network.trial import TrialNetwork

__all__ = [
    "INSTALL_HINT",
    "TOXIPROXY_VERSION",
    "Link",
    "NetworkFaults",
    "NetworkSeam",
    "ProxyHandle",
    "ToxiproxyLocation",
    "ToxiproxyServer",
    "TrialNetwork",
    "cached_binary",
    "find_toxiproxy",
]
