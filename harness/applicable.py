"""Which cells of the table can apply to a target at all, from what it declares.

A cell that cannot apply (a relay the target does not have, a ledger link the harness
cannot put a proxy in, a cap the target does not declare) is not a test that was
skipped: nothing was missing on the machine, and nothing could be learnt by running it.
Such cells are left out of the target's matrix and listed once, each reason with its
cells, and never count as skipped, so ``--strict`` fails only on cells that should
have run. A cell skipped for the machine's sake (no Toxiproxy, no libfaketime) is still
skipped: installing the missing piece would let it run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness.drivers import broker, cancel, child, driver_for, provider, restore, upgrade
from harness.faketime_reach import out_of_reach
from harness.plan import Cell

if TYPE_CHECKING:
    from harness.targets.config import CommandConfig


#: Why no cell aims at a model: what it answers is a plan, never an effect the oracle
#: could count, so its faults have nothing of its own to judge (its re-plans act in the
#: cells of the providers the plan calls, where a retried job is planned again).
PLANS_ONLY = (
    "the provider is a model (kind openai): it answers plans and commits no effect, so a "
    "fault aimed at it has no effect of its own to judge; it re-plans every retried job "
    "in the other providers' cells"
)


def why_not(command: CommandConfig | None, cell: Cell) -> str | None:
    """Why ``cell`` cannot apply to the target ``command`` declares (None: the
    reference worker, to which every row but a broker's applies), or None when it can."""
    if command is None:
        return broker.REFERENCE_NO_BROKER if cell.scenario.needs_broker else None
    from harness.targets.command_state import restore_unsupported

    scenario = cell.scenario
    if scenario.needs_ledger:
        return (
            f"{scenario.name} faults the link to a ledger the harness can put a proxy in "
            "front of; only the reference target has one"
        )
    if scenario.needs_outbox and command.relay is None:
        return (
            f"{scenario.name} kills the target's outbox relay, a second process kind; this "
            'target declares none ([target] relay = ["node", "relay.js"])'
        )
    if scenario.wall_clock and command.docker is None:
        # Under docker the program is the image's; the trial's own look at the process
        # at the failpoint decides there (drivers/clock.py).
        unreachable = out_of_reach(command.command, command.base_dir)
        if unreachable is not None:
            return f"{scenario.name} steps the worker's wall clock, but {unreachable}"
    persona = next((p.persona for p in command.providers if p.name == cell.provider_name), None)
    if persona == "openai":
        return PLANS_ONLY
    if cell.point in provider.NEEDS_CAP and command.max_attempts is None:
        return provider.NO_CAP
    if scenario.needs_pool and not command.pool:
        return child.NO_POOL
    if scenario.name == "upgrade_during_recovery" and command.upgraded_command is None:
        return upgrade.NO_UPGRADE
    if scenario.name == "cancel_in_flight" and command.cancel is None:
        return cancel.NO_CANCEL
    if scenario.needs_broker and command.broker is None:
        return broker.NO_BROKER
    if scenario.name == "retry_backoff" and command.max_attempts == 1:
        return provider.NO_RETRY
    if driver_for(scenario.name, cell.point) is restore.state_store_restore:
        return restore_unsupported(command)
    return None


def effect_providers(command: CommandConfig) -> list[tuple[str, str]]:
    """The declared providers ``(name, kind)`` a fault can aim at: all but a model's,
    which answers plans and commits no effect (:data:`PLANS_ONLY`)."""
    return [(p.name, p.kind) for p in command.providers if p.persona != "openai"]


def split(
    cells: Iterable[Cell], command: CommandConfig | None
) -> tuple[list[Cell], dict[str, str]]:
    """The cells that apply, and the others' ids with the reason each cannot."""
    applies: list[Cell] = []
    not_applicable: dict[str, str] = {}
    for cell in cells:
        reason = why_not(command, cell)
        if reason is None:
            applies.append(cell)
        else:
            not_applicable[cell.id] = reason
    return applies, not_applicable


def grouped(not_applicable: Mapping[str, str]) -> list[dict[str, Any]]:
    """results.json's ``not_applicable``: each reason once, with its cells in order."""
    by_reason: dict[str, list[str]] = {}
    for cell_id, reason in not_applicable.items():
        by_reason.setdefault(reason, []).append(cell_id)
    return [{"reason": r, "cells": sorted(ids)} for r, ids in by_reason.items()]


def summary_line(groups: Sequence[Mapping[str, Any]]) -> str | None:
    """One line for the terminal, or None when every cell applied."""
    if not groups:
        return None
    count = sum(len(g["cells"]) for g in groups)
    reasons = "; ".join(f"{len(g['cells'])} ({g['reason']})" for g in groups)
    return f"not applicable to this target, left out: {count} cells: {reasons}"
