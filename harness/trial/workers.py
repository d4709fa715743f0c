"""The trial's workers: started with the trial's environment, signalled, crashed at
their boundary, stopped clear of the write locks they hold."""

from __future__ import annotations

import functools
import signal
import time
from collections.abc import Mapping
from pathlib import Path

from harness.backends.base import LogsApart, WorkerHandle, record_escalation
from harness.contract.env import STATE_DIR
from harness.contract.errors import Inconclusive
from harness.filelocks import held_write_locks
from harness.rendezvous import Hit
from harness.targets.base import TargetAdapter
from harness.trial.state import TrialState

#: How soon a worker that handles SIGTERM by dying counts as having died at its boundary.
_DIED_AT_ONCE_S = 0.1
#: How often a stopped worker holding a write lock is let run and stopped again, and for
#: how long each time: a transaction such as a lease renewal commits within milliseconds.
STOP_TRIES = 20
LOCK_THAW_S = 0.005


class WorkerVerbs(TrialState):
    """Verbs on the trial's worker processes."""

    def start_worker(
        self,
        *,
        recovery: bool = False,
        direct: bool = False,
        consumer: TargetAdapter | None = None,
        role: str | None = None,
        extra_env: Mapping[str, str] | None = None,
        upgraded: bool = False,
    ) -> WorkerHandle:
        """Start the next worker (of ``consumer``, else of the trial's target); ``direct``
        bypasses the trial's proxies (a healthy peer). ``role="relay"`` starts the
        target's outbox relay instead (named ``r1``, ``r2``, ...); ``extra_env``
        is added to the process's environment last (``CRASHPOINT_OUTBOX=1``, a skewed clock);
        ``upgraded`` starts the target's next release (its ``upgraded_command``)."""
        target = consumer or self.target
        assert target is not None
        assert self.rendezvous is not None
        if role == "relay":
            name = f"r{self._next_relay}"
            self._next_relay += 1
        else:
            name = f"w{self._next_worker}"
            self._next_worker += 1
        env = self._worker_env(target, name, direct=direct, recovery=recovery, role=role)
        env.update(extra_env or {})
        cwd = env.get(STATE_DIR, str(self.dir))
        argv = target.upgraded_argv() if upgraded else target.worker_argv(role)
        assert argv is not None, "the target declares no upgraded command"
        start = functools.partial(self.backend.start, name, argv, env=env, cwd=cwd)
        if Path(cwd) != self.dir and isinstance(self.backend, LogsApart):
            # The worker's own state directory holds the worker's files only (a restore
            # replaces it): its logs are the harness's, and stay in the trial's directory.
            start = functools.partial(
                self.backend.start_with_logs, name, argv, env=env, cwd=cwd, log_dir=self.dir
            )
        with self.phases.timed("spawn"):
            handle = self.names.start(name, start)
        self.workers[name] = handle
        if consumer is not None:
            # The oracle judges this worker's tokens and retries against its own ledger.
            n = next(i for i, (t, _) in enumerate(self.consumers, 2) if t is consumer)
            self.history.append(
                "supervisor",
                "note",
                worker=name,
                consumer=n,
                text=f"{name} works for consumer {n}, with a ledger of its own",
            )
        log = getattr(handle, "stderr_path", None)
        if log is not None:
            self.observer.follow_log(name, Path(log))
        return handle

    def _worker_env(
        self, target: TargetAdapter, name: str, *, direct: bool, recovery: bool, role: str | None
    ) -> dict[str, str]:
        """Worker ``name``'s environment: the trial's, the target's, its own names."""
        env = self.provider_env(direct=direct)
        env.update(
            target.worker_env(
                name,
                mutant=self.cell.mutant,
                lease_ttl_s=self.config.lease_ttl_s,
                http_timeout_s=self.config.http_timeout_s,
            )
        )
        if self.network is not None and not direct and "CRASHPOINT_LEDGER_DSN" in env:
            env["CRASHPOINT_LEDGER_DSN"] = self.network.ledger_dsn(env["CRASHPOINT_LEDGER_DSN"])
        # A command target's [[providers]] env: the same URLs, where the worker's SDK looks.
        aliases = getattr(target, "url_aliases", None)
        if aliases is not None:
            env.update(aliases(env))
        env["CRASHPOINT_WORKER_ID"] = name
        if recovery:
            env["CRASHPOINT_RECOVERY"] = "1"
        if role is not None:
            env["CRASHPOINT_ROLE"] = role
        return env

    def send(self, handle: WorkerHandle, sig: str) -> None:
        """Deliver ``sig`` to the worker's whole tree, recorded in the history."""
        # The backend records the signal in the history as it delivers it.
        signum = signal.Signals[sig]
        if signum == signal.SIGSTOP:
            handle.pause()
            self.paused.add(handle.name)
        elif signum == signal.SIGCONT:
            handle.resume()
            self.paused.discard(handle.name)
        else:
            handle.signal(signum)

    def stop_clear_of_write_locks(self, handle: WorkerHandle) -> None:
        """With ``handle`` just stopped: while one of its threads holds a write lock on
        a file (:mod:`harness.filelocks`), let it run for a moment and stop it again. A
        thread held at a boundary stays there; a background thread (a lease renewal)
        finishes its transaction. About 1 stop in 100 lands inside one
        for a lease renewed every sixth of a second, and then no worker could take over."""
        for _ in range(STOP_TRIES):
            held = held_write_locks(set(handle.tree()))
            if not held:
                return
            self.history.append(
                "supervisor",
                "note",
                text=f"{handle.name} was stopped holding a write lock on a file "
                f"({held[0]}): let run {LOCK_THAW_S * 1000:g} ms and stopped again",
            )
            self.send(handle, "SIGCONT")
            # A deliberate wait: the lock's holder needs a moment of CPU to let it go.
            time.sleep(LOCK_THAW_S)
            self.send(handle, "SIGSTOP")

    def crash(self, handle: WorkerHandle, sig: str, *, hit: Hit | None = None) -> bool:
        """Kill ``handle`` with ``sig``; True when it died at the boundary it was held at.

        A worker may handle SIGTERM by finishing what it holds: it is then let go from
        the boundary and given the SIGTERM grace (``TrialConfig.term_grace``) to exit
        before SIGKILL ends it; the history says when SIGTERM was not enough, and the
        trial knows the crash became a graceful stop.
        """
        sent = time.monotonic()
        self.send(handle, sig)
        at_boundary = True
        if sig != "SIGKILL" and self._wait_exit(handle, _DIED_AT_ONCE_S) is None:
            if hit is not None:
                hit.resume()
                at_boundary = False
            grace = self.config.term_grace
            if self._wait_exit(handle, max(0.0, sent + grace - time.monotonic())) is None:
                record_escalation(self.history, handle.name, handle.pid, sent=sig, grace_s=grace)
                self.send(handle, "SIGKILL")
        if self._wait_exit(handle, 5.0) is None:
            raise Inconclusive(f"worker {handle.name} survived SIGKILL")
        # The backend recorded the exit; say why it was not where the signal was aimed.
        if not at_boundary:
            self.history.append(
                "supervisor",
                "note",
                worker=handle.name,
                text=f"{handle.name} outlived {sig} at its boundary, so it was let go to stop",
            )
        return at_boundary

    def _wait_exit(self, handle: WorkerHandle, timeout_s: float) -> int | None:
        """``handle.wait``, counted as a wait: a worker finishing what it holds within its
        SIGTERM grace, or dying of a signal, takes the worker's time, not the harness's."""
        t0 = time.monotonic()
        try:
            return handle.wait(timeout_s)
        finally:
            self.waits_s += time.monotonic() - t0
