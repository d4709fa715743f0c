"""Armed faults and the hold rendezvous, shared by every request thread of a provider.

A hold parks the request thread until the harness releases it, or until the deadline the
fault gave (``release_after_s``): the provider lets go on time by itself, so a harness
slowed by a loaded machine cannot keep a request frozen past the lease it was sized for.
The earlier release wins; a later one finds the hold released already. The thread never
depends on its client: the harness usually kills the client while it is held, and
releasing must still commit or drop exactly as asked. On shutdown (or after
``hold_max_s``, so a forgotten hold cannot pin a thread forever) holds end as ``drop``.
Each hold keeps who let it go (``released_by``) and when, for the provider's log.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fake_providers.models import HOLD_ACTIONS, Fault
from fake_providers.problems import Problem

#: Who can let a held request go (``Hold.released_by``): a release call, its deadline,
#: the provider's hold limit, or a reset (reset, wipe or shutdown).
RELEASED_BY = ("harness", "deadline", "hold_max", "reset")


@dataclass
class Hold:
    """One held request; ``outcome`` is set once by whoever releases it."""

    fault_id: str
    action: str
    arrival_id: int
    job_id: str | None
    idempotency_key: str | None
    client_marker: str | None
    committed: bool
    effect_id: int | None
    t_mono: float = field(default_factory=time.monotonic)
    #: When the provider lets go by itself (monotonic), with ``deadline_outcome``.
    deadline: float | None = None
    deadline_outcome: str = "commit"
    outcome: str | None = None
    #: Who let it go: ``harness`` (a release call), ``deadline``, ``hold_max`` or
    #: ``reset`` (reset, wipe or shutdown); and when (monotonic).
    released_by: str | None = None
    released_t: float | None = None
    released: threading.Event = field(default_factory=threading.Event)

    def to_json(self) -> dict[str, Any]:
        return {
            "fault_id": self.fault_id,
            "action": self.action,
            "arrival_id": self.arrival_id,
            "job_id": self.job_id,
            "idempotency_key": self.idempotency_key,
            "client_marker": self.client_marker,
            "committed": self.committed,
            "effect_id": self.effect_id,
            "t_mono": self.t_mono,
            "release_by": self.deadline,
            "released_by": self.released_by,
        }

    def release_json(self) -> dict[str, Any]:
        """How the hold ended, as ``release`` answers for a hold let go already."""
        return {
            "arrival_id": self.arrival_id,
            "outcome": self.outcome,
            "released_by": self.released_by,
            "t_mono": self.released_t,
        }


@dataclass
class Armed:
    id: str
    fault: Fault
    remaining: int
    hits: int = 0
    holds: list[Hold] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "fault": self.fault.to_json(),
            "remaining": self.remaining,
            "hits": self.hits,
            "held": [h.to_json() for h in self.holds if not h.released.is_set()],
        }


class FaultBoard:
    """Faults armed by the harness, consumed by matching requests in arming order."""

    def __init__(self, *, hold_max_s: float = 300.0) -> None:
        self.hold_max_s = hold_max_s
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        self._armed: dict[str, Armed] = {}
        self._closed = False
        #: Between :meth:`drain` and :meth:`wipe`: nothing is held, delayed or waited on.
        self._draining = False

    def arm(self, fault: Fault) -> str:
        with self._cond:
            fault_id = f"f-{next(self._ids)}"
            self._armed[fault_id] = Armed(fault_id, fault, fault.times)
            return fault_id

    def take(
        self,
        actions: Iterable[str],
        *,
        job: str | None,
        key: str | None,
        marker: str | None,
    ) -> Armed | None:
        """Consume one use of the first armed fault with one of ``actions`` that matches."""
        wanted = set(actions)
        with self._cond:
            for armed in self._armed.values():
                f = armed.fault
                if armed.remaining <= 0 or f.action not in wanted:
                    continue
                if f.job is not None and f.job != job:
                    continue
                if f.key is not None and f.key != key:
                    continue
                if f.marker is not None and f.marker != marker:
                    continue
                armed.remaining -= 1
                armed.hits += 1
                return armed
        return None

    def hold(self, armed: Armed, hold: Hold) -> str:
        """Park the calling request thread until released; returns the outcome."""
        limit = hold.t_mono + self.hold_max_s
        with self._cond:
            if self._closed or self._draining:
                hold.outcome, hold.released_by, hold.released_t = "drop", "reset", time.monotonic()
                return "drop"
            armed.holds.append(hold)
            self._cond.notify_all()
            while not hold.released.is_set():
                # Read each time round: a release call may shorten the deadline.
                due = limit if hold.deadline is None else min(hold.deadline, limit)
                left = due - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                if hold.deadline is not None and hold.deadline <= limit:
                    self._release(hold, hold.deadline_outcome, by="deadline")
                else:
                    self._release(hold, "drop", by="hold_max")
        return hold.outcome or "drop"

    def wait_held(self, fault_id: str, timeout_s: float, *, after: int = 0) -> Hold | None:
        """The earliest request held under ``fault_id`` (see :meth:`wait_held_count`),
        waiting up to ``timeout_s``."""
        holds = self.wait_held_count(fault_id, 1, timeout_s, after=after)
        return None if holds is None else holds[0]

    def wait_held_count(
        self, fault_id: str, count: int, timeout_s: float, *, after: int = 0
    ) -> list[Hold] | None:
        """The first ``count`` requests held under ``fault_id`` past arrival ``after``, in
        arrival order: still held, or let go at their own deadline already. A short
        deadline (``release_after_s``) can pass before a waiter on a loaded machine asks
        again; that request was held all the same, and the answer says it was let go
        (``released_by``). One released by a call, or by a reset, is not waited for."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            armed = self._get(fault_id)
            if armed.fault.action not in HOLD_ACTIONS:
                raise Problem(
                    409,
                    f"fault {fault_id} is {armed.fault.action!r}, which never holds; "
                    f"wait only on hold_before_commit or hold_after_commit faults",
                )
            while True:
                held = [
                    h
                    for h in armed.holds
                    if h.arrival_id > after
                    and (not h.released.is_set() or h.released_by == "deadline")
                ]
                if len(held) >= count:
                    return held[:count]
                left = deadline - time.monotonic()
                if left <= 0 or self._closed or self._draining:
                    return None
                self._cond.wait(left)

    def release(self, fault_id: str, outcome: str, *, arrival_id: int | None = None) -> int:
        """Release the requests held under ``fault_id`` (or just ``arrival_id``) now."""
        return self.let_go(fault_id, outcome, arrival_id=arrival_id)[0]

    def let_go(
        self,
        fault_id: str,
        outcome: str,
        *,
        arrival_id: int | None = None,
        by: float | None = None,
    ) -> tuple[int, list[Hold]]:
        """Release the requests held under ``fault_id`` (or just ``arrival_id``): now, or
        (``by``, monotonic) at that deadline if it is earlier than the one they have.
        Returns how many were released (or had their deadline set), and the matching
        holds that were released already, for a release that came late."""
        with self._cond:
            armed = self._get(fault_id)
            mine = [h for h in armed.holds if arrival_id is None or h.arrival_id == arrival_id]
            targets = [h for h in mine if not h.released.is_set()]
            if by is not None:
                for h in targets:
                    if h.deadline is None or by < h.deadline:
                        h.deadline, h.deadline_outcome = by, outcome
                self._cond.notify_all()  # each held thread reads its deadline again
            else:
                for h in targets:
                    self._release(h, outcome, by="harness")
            return len(targets), [h for h in mine if h.released.is_set() and h not in targets]

    def disarm_all(self) -> None:
        """Forget armed faults; requests already held stay held until released."""
        with self._cond:
            for fault_id, armed in list(self._armed.items()):
                armed.remaining = 0
                if not any(not h.released.is_set() for h in armed.holds):
                    del self._armed[fault_id]

    def reset(self) -> int:
        """Disarm everything and drop every held request; returns how many were held."""
        with self._cond:
            holds = [h for a in self._armed.values() for h in a.holds]
            self._armed.clear()
        n = 0
        for h in holds:
            n += self._release(h, "drop", by="reset")
        return n

    def pause(self, seconds: float) -> None:
        """Sleep ``seconds`` (an injected delay), or less if a wipe drains the board."""
        deadline = time.monotonic() + seconds
        with self._cond:
            while not (self._closed or self._draining):
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)

    def drain(self) -> int:
        """Until :meth:`wipe`, hold, delay and wait for nothing: every held request is
        dropped and every waiter woken; returns how many requests were held."""
        with self._cond:
            self._draining = True
            self._cond.notify_all()
        return self.reset()

    def wipe(self) -> None:
        """As a new board: nothing armed, fault ids from ``f-1`` again (after :meth:`drain`)."""
        with self._cond:
            self._armed.clear()
            self._ids = itertools.count(1)
            self._draining = False
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self.reset()

    def snapshot(self) -> list[dict[str, Any]]:
        with self._cond:
            return [a.to_json() for a in self._armed.values()]

    def _release(self, hold: Hold, outcome: str, *, by: str) -> int:
        with self._cond:
            if hold.released.is_set():
                return 0
            hold.outcome, hold.released_by, hold.released_t = outcome, by, time.monotonic()
            hold.released.set()
            self._cond.notify_all()
            return 1

    def _get(self, fault_id: str) -> Armed:
        armed = self._armed.get(fault_id)
        if armed is None:
            known = ", ".join(self._armed) or "none"
            raise Problem(
                404,
                f"no armed fault {fault_id!r} (armed: {known}); arm it first, "
                f"or it was cleared by reset",
            )
        return armed
