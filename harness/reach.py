"""How long a worker gets to reach a boundary on a machine that may be starved of CPU.

A boundary is waited for :data:`harness.trial.REACH_S` (plus the target's poll). On a
loaded machine a worker that starts (a runtime, an SDK to import) and then claims may
spend most of that bound ready to run but not running: the bound then measured the
machine, and the cell would end ``inconclusive`` for nothing the worker did. Once the
bound has passed, it is stretched by the longest time one of the workers' tasks waited for
a CPU (:mod:`harness.cpu_wait`), up to the trial's own limit. The workers are counted over
their whole lives, which began within the trial: so the counts are read only when the
bound has passed, never on the way to a boundary reached in time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from harness.contract.errors import RendezvousTimeout
from harness.cpu_wait import CpuWait

T = TypeVar("T")

#: Past the bound, each further wait is this long, so a Ctrl-C (the run's abort) is seen
#: between two of them and the CPU wait is read again.
LOOK_S = 0.25


def within_reach(
    wait: Callable[[float], T],
    bound_s: float,
    *,
    starved: Callable[[], CpuWait],
    most_s: float,
    abort: threading.Event,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``wait(bound_s)``; if that times out, waited on while the workers' CPU wait
    (``starved()``, made only then) still stretches the bound, by at most ``most_s``.
    Raises the first :class:`RendezvousTimeout`, saying how much more was given."""
    start = clock()
    try:
        return wait(bound_s)
    except RendezvousTimeout as exc:
        first = exc
    cpu = starved()
    waited = 0.0
    while not abort.is_set():
        waited = min(cpu.waited_s(), most_s)
        left = start + bound_s + waited - clock()
        if left <= 0:
            break
        try:
            return wait(min(left, LOOK_S))
        except RendezvousTimeout:
            continue
    if waited > 0:
        raise RendezvousTimeout(
            f"{first}; nor in the {waited:.1f} s more that its processes waited for a CPU"
        ) from first
    raise first
