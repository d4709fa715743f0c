"""The orders ``crashpoint check-config`` calls a target's commands in besides the happy
path, as a run does (docs/getting-started.md, "How crashpoint calls your commands"): the
status command before the job's first enqueue, the enqueue before any worker is up, and
the same job id enqueued a second time, as ``duplicate_delivery``, ``simultaneous_trigger``,
``lost_acknowledgement`` and ``key_retention`` do. Watching here, judging in
:func:`order_lines`, without I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.commands.check_lines import FAIL, OK, Line
from harness.contract.errors import ConfigError

if TYPE_CHECKING:
    from harness.targets.command import CommandAdapter

#: What an enqueue that drops a job it holds prints, so the cells say it refused it.
REFUSAL = '{"queued": false}'


@dataclass
class Orders:
    """What the commands did, called in those orders."""

    #: The orders were played (False: only the first enqueue is known to have run).
    played: bool = False
    #: The state the status command gave before the first enqueue; None: not asked.
    status_before: str | None = None
    status_before_error: str | None = None
    #: The second enqueue of the same job: refused (it printed ``{"queued": false}``),
    #: or its error; neither: it queued the job again.
    again_refused: bool = False
    again_error: str | None = None


def exercise_orders(
    adapter: CommandAdapter, job: str, provider: str, body: Mapping[str, Any]
) -> Orders:
    """Ask the job's status before it exists, then enqueue it twice, before any worker
    is up. The first enqueue's failure is raised (nothing else can run without it)."""
    orders = Orders(played=True)
    if adapter.config.status is not None:
        try:
            status = adapter.job_status(job)
        except ConfigError as exc:
            orders.status_before_error = str(exc)
        else:
            orders.status_before = status.state if status is not None else None
    adapter.enqueue(job, provider, body)
    try:
        adapter.enqueue(job, provider, body)
    except ConfigError as exc:
        orders.again_error = str(exc)
    orders.again_refused = job in adapter.refused
    return orders


def order_lines(orders: Orders, job: str, *, status: bool) -> list[Line]:
    """One line per order: what the command did, and what to fix when it failed."""
    lines: list[Line] = []
    if orders.status_before_error is not None:
        lines.append(
            Line(
                FAIL,
                f"before the first enqueue, status failed: {orders.status_before_error}",
                'print {"state": "pending"} for a job the queue does not know yet: '
                "crashpoint may ask before the job's enqueue has landed",
            )
        )
    elif status and orders.played:
        said = orders.status_before or "nothing"
        lines.append(Line(OK, f"before the first enqueue, status says {said}"))
    lines.append(Line(OK, f"enqueue queued job {job}, before any worker was up"))
    if not orders.played:
        return lines
    if orders.again_error is not None:
        lines.append(
            Line(
                FAIL,
                f"enqueue of {job} a second time (same job id) failed: {orders.again_error}",
                "exit 0 on a job you already hold: queue it again, or drop it and print "
                f"{REFUSAL}; the duplicate-delivery rows enqueue every job id twice",
            )
        )
    elif orders.again_refused:
        lines.append(Line(OK, f"enqueue of {job} a second time: the queue refused it ({REFUSAL})"))
    else:
        lines.append(Line(OK, f"enqueue of {job} a second time: exit 0, queued again"))
    return lines
