"""What every reference process has, worker or outbox relay: its configuration, a stop
flag, its mutant switch, its provider client and its JSON log lines on stderr."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from scenarios.mutants import MUTANTS
from scenarios.worker.calls import ProviderCalls
from scenarios.worker.config import WorkerConfig


class ReferenceProcess:
    def __init__(self, cfg: WorkerConfig) -> None:
        self.cfg = cfg
        self.stopping = threading.Event()
        self._bugs = frozenset([cfg.mutant] if cfg.mutant else [])
        self.calls = ProviderCalls(timeout_s=cfg.http_timeout_s, worker_id=cfg.worker_id)

    def bug(self, name: str) -> bool:
        """Is the named mutant switched on? (Names are checked, so a typo cannot hide.)"""
        if name not in MUTANTS:
            raise KeyError(f"no mutant named {name!r}; see scenarios.mutants.MUTANTS")
        return name in self._bugs

    def log(self, event: str, **fields: Any) -> None:
        line = {"t": round(time.monotonic(), 6), "worker": self.cfg.worker_id, "event": event}
        print(json.dumps({**line, **fields}, default=str), file=sys.stderr, flush=True)
