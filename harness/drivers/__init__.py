"""Scenario drivers: how each row of the injection table is played against a target.

A driver gets a set-up :class:`~harness.trial.Trial`, applies the scenario's fault at its
boundary, starts whatever recovery the scenario calls for, and returns the jobs whose
only safe end is needs_review. Quiescence and the oracle are the trial's business.

    process   kills and stops at failpoints and during provider holds
    provider  provider errors, a late answer, failing lookups
    delivery  duplicate delivery and simultaneous triggers
    redelivery  a job enqueued again while its first attempt is in flight, in rounds
    lease     when a held attempt took its lease, to release it within that lease
    restore   the ledger restored from a snapshot
    identity  a job's login expired or its profile changed while its worker was down
    clock     a worker's wall clock stepped past its lease (libfaketime)
    network   Toxiproxy toxics on the provider and ledger links
    outbox    the outbox relay killed after the provider took its message
    steps     multi-step jobs, lost acknowledgements, forgotten keys
    child     one pool child inside a failpoint killed, its parent left running
    storm     three copies of one attempt: two stale, woken while the third owns the job
    upgrade   the recovering workers run the target's next release
    cancel    a job cancelled while its write is held at the provider
    broker    the target's broker restarted in flight or with jobs queued
    registry  the table below: scenario (and point) -> driver
"""

from __future__ import annotations

from harness.drivers import (
    broker,
    cancel,
    child,
    clock,
    delivery,
    identity,
    network,
    outbox,
    process,
    provider,
    restore,
    steps,
    storm,
    upgrade,
)
from harness.drivers.registry import DriverRegistry, NoDriver
from harness.trial import Driver

__all__ = ["DRIVERS", "DriverRegistry", "NoDriver", "driver_for"]

DRIVERS = DriverRegistry()
DRIVERS.register("crash_before_external_call", process.crash_at_failpoint)
DRIVERS.register("crash_after_external_success", process.crash_at_failpoint)
DRIVERS.register("crash_during_external_call", process.crash_during_call)
DRIVERS.register("lease_expiry_slow_worker", process.lease_expiry_slow_worker)
DRIVERS.register("provider_error_before_commit", provider.provider_error_before_commit)
DRIVERS.register(
    "ambiguous_timeout", provider.delayed_response, points=["provider_delay_after_commit"]
)
DRIVERS.register(
    "ambiguous_timeout", network.response_lost, points=["toxic_latency", "toxic_timeout"]
)
DRIVERS.register(
    "provider_down_during_reconcile", provider.lookup_unavailable, points=["provider_lookup_503"]
)
DRIVERS.register(
    "provider_down_during_reconcile",
    network.proxy_down_while_reconciling,
    points=["proxy_disabled"],
)
DRIVERS.register("duplicate_delivery", delivery.duplicate_delivery)
DRIVERS.register("simultaneous_trigger", delivery.simultaneous_trigger)
DRIVERS.register("state_store_restore", restore.state_store_restore)
DRIVERS.register("retry_while_in_flight", provider.held_past_client_timeout)
DRIVERS.register("reset_after_commit", network.response_lost)
DRIVERS.register("ledger_link_faults", network.ledger_link_fault)
DRIVERS.register("slow_lease_renewal", network.slow_lease_renewal)
DRIVERS.register("relay_crash_after_send", outbox.relay_crash_after_send)
DRIVERS.register("multi_step_job", steps.crash_at_step)
DRIVERS.register("lost_acknowledgement", steps.lost_acknowledgement)
DRIVERS.register("key_retention", steps.key_retention)
DRIVERS.register("clock_skew", clock.clock_skew)
DRIVERS.register("identity_lost_on_recovery", identity.identity_lost_on_recovery)
DRIVERS.register("retry_backoff", provider.refused_repeatedly)
DRIVERS.register("redelivery_storm", storm.redelivery_storm)
DRIVERS.register("child_killed", child.child_killed)
DRIVERS.register("upgrade_during_recovery", upgrade.upgrade_during_recovery)
DRIVERS.register("cancel_in_flight", cancel.cancel_in_flight)
DRIVERS.register("broker_restart", broker.broker_restart)


def driver_for(scenario: str, point: str) -> Driver:
    """The driver of ``scenario`` at ``point``; :class:`NoDriver` if none plays it."""
    return DRIVERS.driver_for(scenario, point)
