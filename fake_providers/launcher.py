"""Start fake providers as child processes and hand back a handle on each.

A pool's providers are forked warm by its fork server (``fake_providers.forked``); any
other start, and any fork the fork server cannot make, launches ``python -m
fake_providers``. Either way the provider is the same program behind the same pipes.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Protocol

from fake_providers.client import ProviderClient
from fake_providers.forked import ForkServer, ForkServerError
from fake_providers.models import KINDS
from fake_providers.personas.declared import declared_kind
from fake_providers.seal import make_secret
from fake_providers.tools import TRANSPORTS
from harness.contract.env import provider_env_var
from harness.contract.errors import ProviderError
from harness.contract.vocabulary import DECLARED, PERSONA_KINDS

_live: set[ProviderProcess] = set()
#: How long an MCP provider may take to be ready: it loads the SDK first (LOAD_TIMEOUT_S).
MCP_STARTUP_TIMEOUT_S = 30.0


class Spawned(Protocol):
    """What the launcher uses of a provider's process: ``Popen``, or a forked child."""

    @property
    def pid(self) -> int: ...

    @property
    def stdin(self) -> IO[bytes] | None: ...

    @property
    def stdout(self) -> IO[bytes] | None: ...

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class ProviderProcess:
    """One running provider: its address, its process group, and a client for it.

    ``secret`` opens the provider's control and oracle APIs; it lives in this process
    and the provider's only, so a worker given ``env()`` cannot rewrite the ground truth.
    """

    def __init__(
        self,
        kind: str,
        *,
        state_path: Path,
        name: str,
        port: int,
        key_ttl_s: float,
        peer_pids: bool,
        hold_max_s: float,
        startup_timeout_s: float,
        transport: str = "http",
        tool_hints: Mapping[str, bool] | None = None,
        new_port_on_wipe: bool = False,
        forks: ForkServer | None = None,
        persona: str | None = None,
        routes: Mapping[str, Any] | None = None,
    ) -> None:
        #: The kind (idempotent, plain, unqueryable), a persona's too: what the harness
        #: decides by. ``persona`` is the real API it speaks over it (stripe), or None.
        self.kind = kind
        self.persona = persona
        #: A declared persona's route table (``http``), as JSON; None for any other.
        self.routes = dict(routes) if routes else None
        #: "http", or "mcp": the kind's tools are served at ``url + "/mcp"`` too.
        self.transport = transport
        self.tool_hints = dict(tool_hints) if tool_hints else None
        self.name = name
        self.state_path = state_path
        self.log_path = state_path.with_name(state_path.name + ".log")
        self.key_ttl_s = key_ttl_s
        self._peer_pids = peer_pids
        self._hold_max_s = hold_max_s
        self._startup_timeout_s = startup_timeout_s
        self.port = port
        self.url = ""
        #: The provider's ports besides HTTP by name (an smtp provider's ``smtp``).
        self.listeners: dict[str, str] = {}
        self._new_port_on_wipe = new_port_on_wipe
        self._forks = forks
        #: Processes started so far (1 + restarts): a pool reuses no provider restarted
        #: under a trial, whose log is that trial's evidence.
        self.spawns = 0
        # One per provider, kept across restarts: the client already holds it.
        self.secret = make_secret()
        self._proc = self._spawn()
        self.client = ProviderClient(self.url, secret=self.secret)

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def env_var(self) -> str:
        return provider_env_var(self.name)

    @property
    def worker_url(self) -> str:
        """Where a worker sends its writes: the SMTP listener's ``smtp://host:port`` for
        an smtp provider, else the HTTP URL (whose control API only the harness may use)."""
        return self.listeners.get("smtp", self.url)

    def env(self) -> dict[str, str]:
        """``{CRASHPOINT_PROVIDER_<NAME>_URL: worker_url}`` to merge into a worker's
        environment."""
        return {self.env_var: self.worker_url}

    @property
    def returncode(self) -> int | None:
        """The exit status once stopped or killed (0 after a clean stop), else None."""
        return self._proc.poll()

    def alive(self) -> bool:
        return self._proc.poll() is None

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGTERM (held requests end as drops), then SIGKILL if it lingers."""
        if self._proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self._proc.wait()
        _close_pipes(self._proc)
        _live.discard(self)

    def kill(self) -> None:
        """SIGKILL the provider's process group: nothing acknowledged may be lost."""
        if self._proc.poll() is None:
            self._signal(signal.SIGKILL)
        self._proc.wait()
        _close_pipes(self._proc)
        _live.discard(self)

    def restart(self) -> None:
        """Start again on the same port and state file (stopping first if still running)."""
        self.stop()
        self._proc = self._spawn()

    def wipe(self) -> None:
        """Back to the state of a fresh start (``/_control/wipe``), on the provider's new
        port if it moves on a wipe; ProviderError if it cannot be made fresh."""
        doc = self.client.wipe()
        if doc.get("url"):
            self.url = self.client.url
            self.port = int(self.url.rsplit(":", 1)[1])
        if isinstance(doc.get("listeners"), dict):
            self.listeners = {str(k): str(v) for k, v in doc["listeners"].items()}

    def close(self) -> None:
        self.stop()
        self.client.close()

    def __enter__(self) -> ProviderProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def wire(self) -> str:
        """What the provider process is started as: its persona, else its kind."""
        return self.persona or self.kind

    def __repr__(self) -> str:
        persona = f", persona={self.persona!r}" if self.persona else ""
        return f"ProviderProcess(kind={self.kind!r}{persona}, name={self.name!r}, url={self.url!r})"

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, sig)

    def _settings(self) -> dict[str, Any]:
        """How this provider starts: the fork server's request, and the command line."""
        return {
            "kind": self.wire,
            "port": self.port,
            "state": str(self.state_path),
            "name": self.name,
            "key_ttl_s": self.key_ttl_s,
            "hold_max_s": self._hold_max_s,
            "transport": self.transport,
            "tool_hints": self.tool_hints,
            "peer_pids": self._peer_pids,
            "new_port_on_wipe": self._new_port_on_wipe,
            "routes": self.routes,
        }

    def _argv(self) -> list[str]:
        argv = [
            sys.executable,
            "-m",
            "fake_providers",
            "--kind",
            self.wire,
            "--port",
            str(self.port),
            "--state",
            str(self.state_path),
            "--name",
            self.name,
            "--key-ttl-s",
            repr(self.key_ttl_s),
            "--hold-max-s",
            repr(self._hold_max_s),
            "--exit-on-stdin-eof",
            "--secret-stdin",
        ]
        if self.transport != "http":
            argv += ["--transport", self.transport]
        if self.tool_hints:
            argv += ["--tool-hints", json.dumps(self.tool_hints)]
        if not self._peer_pids:
            argv.append("--no-peer-pid")
        if self._new_port_on_wipe:
            argv.append("--new-port-on-wipe")
        if self.routes:
            argv += ["--routes", json.dumps(self.routes)]
        return argv

    def _launch(self) -> Spawned:
        if self._forks is not None:
            try:
                return self._forks.spawn(self._settings(), self.log_path)
            except ForkServerError:
                # Cold, but the same provider: the run goes on at a launch's cost.
                self._forks = None
        with open(self.log_path, "ab") as log:
            return subprocess.Popen(
                self._argv(),
                # The secret's only way in (an environment or argv is readable in /proc),
                # then silent: when this process dies, the provider sees EOF and stops.
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                # Own process group, so kill() reaches the provider and nothing else.
                start_new_session=True,
            )

    def _spawn(self) -> Spawned:
        proc = self._launch()
        try:
            self._hand_secret(proc)
            ready = self._read_ready(proc)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            # A Ctrl-C just after the fork can come before the child's setsid(): no group
            # of that id yet, and the child, waiting for a secret that never comes, would
            # hold this wait forever. The process itself is always there to kill.
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
            _close_pipes(proc)
            raise
        _live.add(self)
        self.spawns += 1
        self.url = str(ready["url"])
        self.port = int(self.url.rsplit(":", 1)[1])
        found = ready.get("listeners")
        self.listeners = (
            {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
        )
        return proc

    def _hand_secret(self, proc: Spawned) -> None:
        if proc.stdin is None:
            raise ProviderError("provider stdin is not a pipe; cannot hand it its secret")
        try:
            proc.stdin.write(self.secret.encode() + b"\n")
            proc.stdin.flush()
        except BrokenPipeError:
            code = proc.wait()
            raise ProviderError(
                f"{self.wire} provider exited with {code} before reading its secret: "
                f"{self._log_tail()}"
            ) from None

    def _read_ready(self, proc: Spawned) -> dict[str, object]:
        out = proc.stdout
        if out is None:
            raise ProviderError("provider stdout is not a pipe; cannot read its ready line")
        deadline = time.monotonic() + self._startup_timeout_s
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(out, selectors.EVENT_READ)
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise ProviderError(
                        f"{self.wire} provider on port {self.port} was not ready within "
                        f"{self._startup_timeout_s:g} s; see {self.log_path}"
                    )
                chunk = os.read(out.fileno(), 4096)
                if not chunk:
                    code = proc.wait()
                    raise ProviderError(
                        f"{self.wire} provider exited with {code} before it was ready "
                        f"(port {self.port}, state {self.state_path}): {self._log_tail()}"
                    )
                buf += chunk
        out.close()
        line = buf.split(b"\n", 1)[0]
        try:
            ready = json.loads(line)
        except ValueError:
            raise ProviderError(f"provider ready line {line!r} is not JSON") from None
        if not isinstance(ready, dict) or not ready.get("ready"):
            raise ProviderError(f"provider ready line {line!r} does not say ready")
        return ready

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-800:].strip() or "(empty log)"
        except OSError:
            return "(no log)"


def start_provider(
    kind: str,
    *,
    state_path: Path | str,
    name: str | None = None,
    port: int = 0,
    key_ttl_s: float = 86400.0,
    peer_pids: bool = True,
    hold_max_s: float = 300.0,
    startup_timeout_s: float | None = None,
    transport: str = "http",
    tool_hints: Mapping[str, bool] | None = None,
    new_port_on_wipe: bool = False,
    forks: ForkServer | None = None,
    persona: str | None = None,
    routes: Mapping[str, Any] | None = None,
) -> ProviderProcess:
    """Start a ``kind`` provider on loopback; returns once it answers.

    ``name`` (default: ``kind``) labels its arrivals and effects and names the worker's
    ``CRASHPOINT_PROVIDER_<NAME>_URL`` variable (see ``ProviderProcess.env``). The
    provider's stderr goes to ``<state_path>.log``, which survives its crashes. A hold
    nobody releases ends as a drop after ``hold_max_s``. ``transport="mcp"`` serves the
    kind's tools at ``url + "/mcp"`` as well (``tool_hints`` override its write tool's
    annotations). ``startup_timeout_s`` defaults to 5 s, and to 30 s for an MCP
    provider, which is ready only once the SDK has loaded (seconds on a busy machine).
    ``new_port_on_wipe``: each ``wipe()`` moves it to a new port (``url`` follows).
    ``forks``: fork it warm from that fork server (a pool's), launching it only if the
    fork server cannot.

    ``kind`` may name a persona (``"stripe"``), or ``persona`` may name one over its
    ``kind`` (``"idempotent", persona="stripe"``): either way the process speaks the
    persona, and its ``kind`` is the persona's kind, which is what the harness decides by.
    A declared API (``"http"``) is started with its ``routes``, whose table gives its kind.
    """
    if kind not in KINDS and kind not in PERSONA_KINDS:
        known = ", ".join((*KINDS, *PERSONA_KINDS))
        raise ProviderError(f"provider kind={kind!r} is unknown; use one of {known}")
    if DECLARED in (kind, persona):
        if routes is None:
            raise ProviderError('a provider of kind "http" needs its routes')
        kind, persona = declared_kind(routes), DECLARED
    elif kind in PERSONA_KINDS:
        if persona not in (None, kind):
            raise ProviderError(f"provider kind={kind!r} is a persona; persona={persona!r} too")
        kind, persona = PERSONA_KINDS[kind], kind
    elif persona is not None and PERSONA_KINDS.get(persona) != kind:
        raise ProviderError(
            f"provider persona={persona!r} is not a persona over kind={kind!r}; use one of "
            + ", ".join(p for p, k in PERSONA_KINDS.items() if k == kind)
        )
    if transport not in TRANSPORTS:
        raise ProviderError(
            f"provider transport={transport!r} is unknown; use one of {', '.join(TRANSPORTS)}"
        )
    state_path = Path(state_path)
    if not state_path.parent.is_dir():
        raise ProviderError(
            f"state_path={str(state_path)!r} is in a directory that does not exist; create "
            f"{str(state_path.parent)!r} first (the provider keeps its log beside the state)"
        )
    p = ProviderProcess(
        kind,
        state_path=state_path,
        name=name or persona or kind,
        port=port,
        key_ttl_s=key_ttl_s,
        peer_pids=peer_pids,
        hold_max_s=hold_max_s,
        startup_timeout_s=startup_timeout_s
        or (MCP_STARTUP_TIMEOUT_S if transport == "mcp" else 5.0),
        transport=transport,
        tool_hints=tool_hints,
        new_port_on_wipe=new_port_on_wipe,
        forks=forks,
        persona=persona,
        routes=routes,
    )
    return p


def _close_pipes(proc: Spawned) -> None:
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


@atexit.register
def _reap() -> None:
    # A harness that exits without stopping its providers must not leave them running.
    for p in list(_live):
        p.kill()
