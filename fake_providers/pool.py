"""Warm providers for the trials of one run: leased out, wiped when given back.

Starting a provider is a Python process launch (about 100 ms of CPU); a trial needs one
per declared provider, and a run has many trials. The pool keeps the processes a trial
gave back and hands them to the next trial that asks for the same kind of provider,
after a wipe (``POST /_control/wipe``) has made them as fresh as a new start: empty
log, nothing armed or held, the settings they started with, ids from 1, and a new port,
so nothing sent during the trial before (a request still in a socket buffer, a worker
that escaped its trial) can reach the store the next trial reads.

New providers are forked warm by the pool's fork server (``fake_providers.forked``):
at the default width a run starts dozens while every core is busy, and each launch
would cost its own interpreter start and imports.

A provider that died, was restarted or killed while leased, or whose wipe failed, is
closed, never reused. The state files live in the pool's own directory, removed when
the pool closes; closing stops every provider it ever started.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import tempfile
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from fake_providers.forked import ForkServer
from fake_providers.launcher import ProviderProcess, start_provider
from harness.contract.errors import ProviderError


class Guard(Protocol):
    """What must not outlive the run is registered here (the harness's watchdog)."""

    def watch_dir(self, path: str | Path) -> None: ...

    def forget_dir(self, path: str | Path) -> None: ...

    def watch_group(self, pgid: int) -> None: ...

    def forget_group(self, pgid: int) -> None: ...


Key = tuple[str, str, str]


class ProviderPool:
    """Provider processes shared by the trials of one run; thread safe."""

    def __init__(self, *, workdir: Path | None = None, guard: Guard | None = None) -> None:
        base = workdir or Path(tempfile.gettempdir())
        base.mkdir(parents=True, exist_ok=True)
        self.dir = Path(tempfile.mkdtemp(prefix="cp-providers-", dir=base))
        self._guard = guard
        if guard is not None:
            guard.watch_dir(self.dir)  # removed even if the harness is SIGKILLed
        self._lock = threading.Lock()
        self._idle: dict[Key, list[ProviderProcess]] = {}
        #: Leased providers: id -> (provider, its key, its spawns when leased).
        self._leased: dict[int, tuple[ProviderProcess, Key, int]] = {}
        #: The process group each provider was registered with the guard under.
        self._watched: dict[int, int] = {}
        self._started = 0
        self._closed = False
        self.forks = ForkServer(self.dir / "forkserver.log", guard=guard)
        #: How many leases a warm provider served, and how many started one.
        self.reused = 0
        self.started = 0

    def lease(self, kind: str, *, name: str, **options: Any) -> ProviderProcess:
        """A provider of ``kind`` named ``name`` started with ``options``
        (``start_provider``'s), fresh: a wiped one given back before, or a new one."""
        key = _key(kind, name, options)
        while True:
            with self._lock:
                if self._closed:
                    raise ProviderError("the provider pool is closed; the run is over")
                idle = self._idle.get(key)
                p = idle.pop() if idle else None
                if p is not None and p.alive():
                    self._leased[id(p)] = (p, key, p.spawns)
                    self.reused += 1
                    return p
            if p is None:
                break
            self._discard(p)  # died while idle
        with self._lock:
            self._started += 1
            n = self._started
        state = self.dir / f"{_safe(name)}-{n}.db"
        p = start_provider(
            kind, state_path=state, name=name, new_port_on_wipe=True, forks=self.forks, **options
        )
        if self._guard is not None:
            self._guard.watch_group(p.pid)
        with self._lock:
            self._watched[id(p)] = p.pid
            closed = self._closed
            if not closed:
                self._leased[id(p)] = (p, key, p.spawns)
                self.started += 1
        if closed:
            self._discard(p)
            raise ProviderError("the provider pool is closed; the run is over")
        return p

    def give_back(self, p: ProviderProcess) -> bool:
        """Take ``p`` back from its trial: wiped and kept for the next one (True), or
        closed (False) if it died, was restarted or killed, or could not be wiped."""
        with self._lock:
            entry = self._leased.pop(id(p), None)
            closed = self._closed
        if entry is None or closed:
            self._discard(p)
            return False
        _, key, spawns = entry
        keep = p.alive() and p.spawns == spawns
        if keep:
            try:
                p.wipe()
            except Exception:
                keep = False
        if not keep:
            self._discard(p)
            return False
        with self._lock:
            if not self._closed:
                self._idle.setdefault(key, []).append(p)
                return True
        self._discard(p)
        return False

    def close(self) -> None:
        """Stop every provider of the pool, leased or not, and remove its directory."""
        with self._lock:
            self._closed = True
            every = [p for ps in self._idle.values() for p in ps]
            every += [p for p, _, _ in self._leased.values()]
            self._idle.clear()
            self._leased.clear()
        if every:
            # Side by side: each stop waits for its process to exit, and they add up.
            with ThreadPoolExecutor(max_workers=min(len(every), 16)) as threads:
                list(threads.map(self._discard, every))
        self.forks.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self._guard is not None:
            self._guard.forget_dir(self.dir)

    def __enter__(self) -> ProviderPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _discard(self, p: ProviderProcess) -> None:
        with contextlib.suppress(Exception):
            p.close()
        with self._lock:
            pgid = self._watched.pop(id(p), None)
        if self._guard is not None and pgid is not None:
            with contextlib.suppress(Exception):
                self._guard.forget_group(pgid)


def _key(kind: str, name: str, options: Mapping[str, Any]) -> Key:
    """Everything that makes two providers differ: a lease gets one started the same."""
    return (kind, name, json.dumps(dict(options), sort_keys=True, default=repr))


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:40] or "provider"
