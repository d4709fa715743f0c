"""Epochs: what fences a wiped provider off from every request of its life before.

A provider reused across trials is wiped between them (``POST /_control/wipe``). A
request of the earlier trial may still be on its way: in a socket buffer of a connection
a killed worker opened, or in a handler thread mid-request. Each connection is stamped
with the epoch it was accepted in, and a wipe starts a new one; a handler of an older
epoch drops its request before it touches the store, and the wipe waits until every
handler already past that check is done, so nothing of before lands after the wipe.

Connections are whatever objects the server hands in (sockets); nothing here does I/O,
so the unit tests drive it with plain objects.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


class Epochs:
    """Which epoch each open connection, and each handler inside a request, belongs to."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.epoch = 0
        self._conns: dict[Any, int] = {}
        #: Handler threads inside a request: thread id -> (epoch, connection).
        self._busy: dict[int, tuple[int, Any]] = {}

    def opened(self, conn: Any) -> int:
        """Stamp ``conn`` with the current epoch; returns it."""
        with self._cond:
            self._conns[conn] = self.epoch
            return self.epoch

    def closed(self, conn: Any) -> None:
        with self._cond:
            self._conns.pop(conn, None)

    def epoch_of(self, conn: Any) -> int:
        """The epoch ``conn`` was accepted in (the current one if it is unknown)."""
        with self._cond:
            return self._conns.get(conn, self.epoch)

    def enter(self, conn: Any, epoch: int) -> bool:
        """Begin a request on ``conn`` (accepted in ``epoch``): False if a wipe came since,
        and the request must be dropped untouched."""
        with self._cond:
            if epoch != self.epoch:
                return False
            self._busy[threading.get_ident()] = (epoch, conn)
            return True

    def leave(self) -> None:
        """The calling handler's request is over."""
        with self._cond:
            self._busy.pop(threading.get_ident(), None)
            self._cond.notify_all()

    def advance(self, during: Callable[[], None] | None = None) -> list[Any]:
        """Start a new epoch (calling ``during`` under the same lock, so no connection is
        stamped half way); returns the older connections, the caller's own left out."""
        me = self._busy_conn()
        with self._cond:
            if during is not None:
                during()
            self.epoch += 1
            return [c for c, e in self._conns.items() if e < self.epoch and c is not me]

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no handler of an older epoch is inside a request (the caller's own
        aside); False if some still is after ``timeout_s``."""
        me = threading.get_ident()
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while any(e < self.epoch and t != me for t, (e, _) in self._busy.items()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def busy(self) -> int:
        """How many handlers of an older epoch are still inside a request."""
        with self._cond:
            return sum(1 for e, _ in self._busy.values() if e < self.epoch)

    def _busy_conn(self) -> Any:
        with self._cond:
            entry = self._busy.get(threading.get_ident())
        return None if entry is None else entry[1]
