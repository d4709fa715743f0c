"""Network faults: Toxiproxy toxics timed to provider and failpoint events.

The provider reports the moment it committed (a hold after commit); the toxic goes on
then, so the response, not the request, is lost. Every toxic comes off again once it
has done its work, so recovery runs on a healthy network and the trial can end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fake_providers import Fault
from harness.contract.errors import Inconclusive
from harness.drivers.review import NONE, review_if_unqueryable
from harness.trial import Trial

if TYPE_CHECKING:
    from harness.network.seam import NetworkSeam


def _net(trial: Trial) -> NetworkSeam:
    if trial.network is None:
        raise Inconclusive("this cell needs Toxiproxy, and the trial has no network")
    return trial.network


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def response_lost(trial: Trial) -> frozenset[str]:
    """Commit, then lose the response to latency, a timeout toxic or a reset."""
    net = _net(trial)
    job = trial.enqueue_batch()
    fault_id = trial.arm(Fault("hold_after_commit", job=job))
    trial.start_worker()
    trial.wait_held(fault_id, what=f"the commit of {job}")
    timeout = trial.config.http_timeout_s
    if trial.cell.point == "toxic_latency":
        toxic = net.on("provider", "latency", latency=_ms(timeout * 3), jitter=0)
    elif trial.cell.point == "toxic_timeout":
        toxic = net.on("provider", "timeout", timeout=0)
    else:
        toxic = net.on("provider", "reset_peer", timeout=0)
    trial.release(fault_id, "respond")
    # Long enough for the worker's client to give up on the lost response.
    trial.sleep(timeout * 1.5)
    net.off("provider", toxic)
    return review_if_unqueryable(trial, job)


def proxy_down_while_reconciling(trial: Trial) -> frozenset[str]:
    """Crash after the call; the recovering worker reconciles against a dead provider."""
    net = _net(trial)
    job = trial.enqueue_batch()
    gate = trial.hold("after_external_call", job=job, or_next=True)
    w1 = trial.start_worker()
    hit = trial.wait_hit(gate, what=f"failpoint after_external_call for {job}")
    job = hit.job or job
    trial.crash(w1, "SIGKILL", hit=hit)
    reconcile = trial.hold("before_reconcile", job=job)
    trial.start_worker()
    hit2 = trial.wait_hit(reconcile, what=f"failpoint before_reconcile for {job}")
    net.down("provider")
    hit2.resume()
    # Several reconcile retries meet the outage before the provider comes back.
    trial.sleep(trial.config.lease_ttl_s * 2)
    net.up("provider")
    return NONE


def ledger_link_fault(trial: Trial) -> frozenset[str]:
    """Latency or a reset on the worker's database link while it writes its result."""
    net = _net(trial)
    job = trial.enqueue_batch()
    gate = trial.hold("after_external_call", job=job, or_next=True)
    trial.start_worker()
    hit = trial.wait_hit(gate, what=f"failpoint after_external_call for {job}")
    lease = trial.config.lease_ttl_s
    if trial.cell.point == "ledger_reset":
        toxics = [net.on("ledger", "reset_peer", timeout=0)]
    else:
        # Both ways: the result write reaches the database late and its answer comes
        # back late, so the lease can lapse while the write is on the wire.
        toxics = [
            net.on("ledger", "latency", latency=_ms(lease * 0.75), stream=stream)
            for stream in ("upstream", "downstream")
        ]
    hit.resume()
    trial.sleep(lease)
    for toxic in toxics:
        net.off("ledger", toxic)
    # A healthy peer recovers whatever the faulted worker could not finish.
    trial.start_worker(direct=True)
    return NONE


def slow_lease_renewal(trial: Trial) -> frozenset[str]:
    """The owner's ledger link slows past its lease; it must stop before calling out."""
    net = _net(trial)
    job = trial.enqueue_batch()
    gate = trial.hold("after_claim", job=job)
    trial.start_worker()
    hit = trial.wait_hit(gate, what=f"failpoint after_claim for {job}")
    lease = trial.config.lease_ttl_s
    toxic = net.on("ledger", "latency", latency=_ms(lease * 2), jitter=0)
    hit.resume()
    trial.sleep(lease * 1.2)
    trial.start_worker(direct=True)
    trial.sleep(lease * 2)
    net.off("ledger", toxic)
    return NONE
