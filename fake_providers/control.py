"""The control API: the harness arms faults and meets held requests through it."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from fake_providers.faults import FaultBoard
from fake_providers.identity import IdentityBoard
from fake_providers.messages import Reply, Request, first_param, json_object, non_negative_int
from fake_providers.models import OUTCOMES, Fault, json_int
from fake_providers.problems import Problem
from fake_providers.store import Store

#: A single long-poll never waits longer than this; clients loop for longer waits.
MAX_POLL_S = 10.0

Routes = dict[str, Callable[[], Reply]]


class Fence(Protocol):
    """What a wipe asks of the server in front of the app (fake_providers.epochs)."""

    @property
    def url(self) -> str: ...

    def begin(self) -> int:
        """Start a new epoch, shutting every connection of before; how many were shut."""
        ...

    def wait(self) -> bool:
        """Wait (bounded) until no request of an older epoch is being handled."""
        ...


class Listener(Protocol):
    """A port of the provider besides its HTTP one (the SMTP listener of an smtp
    provider): what the worker reaches it at, and how it stops."""

    name: str

    @property
    def url(self) -> str: ...

    def close(self) -> None: ...


class NoFence:
    """An app with no server in front (the unit tests call it directly): no connections."""

    url = ""

    def begin(self) -> int:
        return 0

    def wait(self) -> bool:
        return True


class ControlAPI:
    """Routes under ``/_control/``; holds block only the long-polling request's thread."""

    def __init__(
        self,
        board: FaultBoard,
        *,
        kind: str,
        name: str,
        store: Store | None = None,
        identities: IdentityBoard | None = None,
    ) -> None:
        self.board = board
        self.kind = kind
        self.name = name
        #: The effect log whose settings ``/_control/settings`` changes (None: none).
        self.store = store
        self.identities = identities or IdentityBoard()
        #: The server's fence, which a wipe raises before it forgets anything.
        self.fence: Fence = NoFence()
        #: The provider's other listeners (its SMTP port), whose addresses the health,
        #: the wipe and the ready line report: a wipe may move them.
        self.listeners: list[Listener] = []
        self._start_ttl = None if store is None else store.key_ttl_s

    def routes(self, req: Request, path: str, query: dict[str, list[str]]) -> Routes | None:
        fixed: dict[str, Routes] = {
            "/_control/health": {"GET": self._health},
            "/_control/faults": {
                "GET": lambda: Reply.json(200, self.board.snapshot()),
                "POST": lambda: self._arm(req),
                "DELETE": self._disarm,
            },
            "/_control/reset": {"POST": self._reset},
            "/_control/wipe": {"POST": self._wipe},
            "/_control/settings": {
                "GET": self._settings,
                "POST": lambda: self._configure(req),
            },
            "/_control/identities": {
                "GET": lambda: Reply.json(200, self.identities.snapshot()),
                "POST": lambda: self._set_identity(req),
            },
        }
        if path in fixed:
            return fixed[path]
        return self._fault_routes(req, path, query)

    def _fault_routes(self, req: Request, path: str, query: dict[str, list[str]]) -> Routes | None:
        parts = path.split("/")
        # /_control/faults/{id}/held and /_control/faults/{id}/release
        if len(parts) != 5 or parts[1:3] != ["_control", "faults"]:
            return None
        fault_id, verb = parts[3], parts[4]
        if verb == "held":
            return {"GET": lambda: self._held(fault_id, query)}
        if verb == "release":
            return {"POST": lambda: self._release(fault_id, req)}
        return None

    def addresses(self) -> dict[str, str]:
        """Each further listener's address by its name (``{"smtp": "smtp://..."}``)."""
        return {listener.name: listener.url for listener in self.listeners}

    def _health(self) -> Reply:
        doc: dict[str, object] = {"ok": True, "kind": self.kind, "name": self.name}
        if self.listeners:
            doc["listeners"] = self.addresses()
        return Reply.json(200, doc)

    def _arm(self, req: Request) -> Reply:
        data = json_object(req)
        try:
            fault = Fault.from_json(data)
        except (TypeError, ValueError) as exc:
            raise Problem(422, f"bad fault {data!r}: {exc}") from exc
        if fault.delay_s > self.board.hold_max_s:
            # A delay is a hold nobody releases; it must not pin a thread for longer.
            raise Problem(
                422,
                f"delay_s={fault.delay_s!r} exceeds this provider's hold limit of "
                f"{self.board.hold_max_s:g} s (--hold-max-s)",
            )
        if fault.release_after_s is not None and fault.release_after_s > self.board.hold_max_s:
            # The hold limit would drop the request first: not the outcome asked for.
            raise Problem(
                422,
                f"release_after_s={fault.release_after_s!r} exceeds this provider's hold "
                f"limit of {self.board.hold_max_s:g} s (--hold-max-s)",
            )
        return Reply.json(201, {"fault_id": self.board.arm(fault)})

    def _disarm(self) -> Reply:
        self.board.disarm_all()
        return Reply.json(200, {"disarmed": True})

    def _settings(self) -> Reply:
        ttl = None if self.store is None else self.store.key_ttl_s
        return Reply.json(200, {"key_ttl_s": ttl})

    def _configure(self, req: Request) -> Reply:
        """Change the provider's settings for the rest of its life (one trial's)."""
        data = json_object(req)
        unknown = sorted(set(data) - {"key_ttl_s"})
        if unknown:
            raise Problem(422, f"unknown settings {unknown!r}; the one setting is key_ttl_s")
        if "key_ttl_s" in data:
            ttl = _positive_seconds(json_int(data["key_ttl_s"]))
            if ttl is None:
                raise Problem(
                    422,
                    f"key_ttl_s={data['key_ttl_s']!r} must be a positive, finite number of seconds",
                )
            if self.store is None:
                raise Problem(409, "this provider has no key store to configure")
            # Keys already stored age by the new TTL too: retention is the provider's
            # policy, not a property each key was born with.
            self.store.key_ttl_s = ttl
        return self._settings()

    def _reset(self) -> Reply:
        self.identities.reset()
        return Reply.json(200, {"released": self.board.reset()})

    def _wipe(self) -> Reply:
        """Back to the state of a fresh start: no arrivals, effects, keys, faults, holds
        or identities, the settings it started with, ids from 1 again (and a new port,
        if the server moves on a wipe). Nothing sent before reaches the store after."""
        fenced = self.fence.begin()
        # Held and delayed requests end now (as drops), so the wait below is short.
        dropped = self.board.drain()
        if not self.fence.wait():
            raise Problem(
                503,
                "requests sent before the wipe are still being handled; this provider "
                "cannot be made fresh, stop it and start another",
            )
        self.board.wipe()
        self.identities.reset()
        if self.store is not None:
            self.store.wipe()
            assert self._start_ttl is not None
            self.store.key_ttl_s = self._start_ttl
        doc: dict[str, object] = {"url": self.fence.url or None, "fenced": fenced}
        doc["dropped"] = dropped
        if self.listeners:
            doc["listeners"] = self.addresses()
        return Reply.json(
            200,
            doc,
            # This connection is of before the wipe too: the next request comes on a new one.
            headers=(("Connection", "close"),),
        )

    def _set_identity(self, req: Request) -> Reply:
        """``{"identity", "state": valid|expired|changed, "now_acts_as"}``: from now on,
        requests under that identity are refused (or served again, for ``valid``)."""
        data = json_object(req)
        unknown = sorted(set(data) - {"identity", "state", "now_acts_as"})
        if unknown:
            raise Problem(422, f"unknown field {unknown[0]!r}; send identity, state, now_acts_as")
        try:
            self.identities.set(
                data.get("identity"),  # type: ignore[arg-type]
                data.get("state"),  # type: ignore[arg-type]
                now_acts_as=data.get("now_acts_as"),
            )
        except ValueError as exc:
            raise Problem(422, f"bad identity state {data!r}: {exc}") from exc
        return Reply.json(200, self.identities.snapshot())

    def _held(self, fault_id: str, query: dict[str, list[str]]) -> Reply:
        raw = first_param(query, "timeout_s")
        if raw is None:
            raw = "0"
        try:
            seconds = float(raw)
        except ValueError:
            seconds = math.nan
        if math.isnan(seconds):
            raise Problem(400, f"timeout_s={raw!r} is not a number of seconds")
        timeout_s = min(max(seconds, 0.0), MAX_POLL_S)
        raw_after = first_param(query, "after")
        after = 0 if raw_after is None else non_negative_int(raw_after, "after")
        raw_count = first_param(query, "count")
        if raw_count is None:
            hold = self.board.wait_held(fault_id, timeout_s, after=after)
            if hold is None:
                raise Problem(
                    408, f"no request held under fault {fault_id} after {timeout_s:g} s; poll again"
                )
            return Reply.json(200, hold.to_json())
        count = non_negative_int(raw_count, "count")
        if count < 1:
            raise Problem(400, f"count={raw_count!r} must be a positive integer")
        holds = self.board.wait_held_count(fault_id, count, timeout_s, after=after)
        if holds is None:
            raise Problem(
                408,
                f"fewer than {raw_count} requests held under fault {fault_id} after "
                f"{timeout_s:g} s; poll again",
            )
        return Reply.json(200, [h.to_json() for h in holds])

    def _release(self, fault_id: str, req: Request) -> Reply:
        """Let held requests go now, or (``release_by``, on this machine's monotonic
        clock) at that deadline when it is earlier than theirs. A release that finds its
        holds let go already (their deadline came first) is no error: the answer says how
        each ended (``earlier``)."""
        data = json_object(req)
        outcome = data.get("outcome", "commit")
        if not isinstance(outcome, str) or outcome not in OUTCOMES:
            raise Problem(422, f"outcome={outcome!r} is unknown; use one of {', '.join(OUTCOMES)}")
        arrival_id = json_int(data.get("arrival_id"))
        if arrival_id is not None and (
            not isinstance(arrival_id, int) or isinstance(arrival_id, bool)
        ):
            raise Problem(422, f"arrival_id={arrival_id!r} must be an integer")
        by = data.get("release_by")
        if by is not None and (
            isinstance(by, bool) or not isinstance(by, int | float) or not math.isfinite(by)
        ):
            raise Problem(
                422,
                f"release_by={by!r} must be a finite time on the provider's monotonic clock "
                "(seconds, as t_mono in held requests), or null to release now",
            )
        n, earlier = self.board.let_go(
            fault_id,
            "drop" if outcome == "drop" else "commit",
            arrival_id=arrival_id,
            by=None if by is None else float(by),
        )
        if n == 0 and not earlier:
            raise Problem(
                409,
                f"fault {fault_id} holds no request{'' if arrival_id is None else f' {arrival_id}'}"
                f"; call wait_held first",
            )
        doc: dict[str, object] = {"released": 0 if by is not None else n}
        if by is not None:
            doc["scheduled"] = n
        doc["earlier"] = [h.release_json() for h in earlier]
        return Reply.json(200, doc)


def _positive_seconds(value: object) -> float | None:
    """``value`` as seconds if it is a positive, finite JSON number; else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        seconds = float(value)
    except OverflowError:  # an integer too large for a float
        return None
    return seconds if 0 < seconds < math.inf else None
