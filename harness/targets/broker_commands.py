"""A broker the target starts and stops with commands of its own (``[target.broker]``
``start``, ``stop`` and ``url``), for a broker the harness does not start itself.

The harness picks the trial's port and data directory and fills them in as ``{port}``
and ``{data_dir}``; ``stop`` gets ``{signal}`` too (``SIGTERM`` or ``SIGKILL``: how
``broker_restart`` stops it), and ``start`` must return once the broker takes
connections. A failing command is the configuration's problem: one
:class:`ConfigError` line naming it and its last words, as for enqueue and status.
"""

from __future__ import annotations

import os
import shlex
import signal
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from harness.brokers import Broker, GroupWatch, RedisBroker, free_port
from harness.contract.errors import ConfigError
from harness.targets.bounded import Overran, run_bounded
from harness.targets.command_output import stderr_tail
from harness.targets.config_broker import BrokerDecl

#: How long a start or stop command may take.
COMMAND_TIMEOUT_S = 20.0


def trial_broker(
    decl: BrokerDecl | None,
    data_dir: Path,
    *,
    config_path: Path,
    resolve: Callable[[Iterable[str]], list[str]],
) -> Broker | None:
    """The trial's broker as declared (not started yet), or None."""
    if decl is None:
        return None
    if decl.kind == "redis":
        return RedisBroker(data_dir)
    return CommandBroker(decl, data_dir, config_path=config_path, resolve=resolve)


class CommandBroker:
    """The target's own broker, run by its ``start`` and ``stop`` commands."""

    kind = "command"

    def __init__(
        self,
        decl: BrokerDecl,
        data_dir: Path,
        *,
        config_path: Path,
        resolve: Callable[[Iterable[str]], list[str]],
    ) -> None:
        assert decl.url is not None
        self.decl = decl
        self.data_dir = data_dir
        self.config_path = config_path
        self._resolve = resolve
        self.port = 0
        self.watchdog: GroupWatch | None = None
        self._running = False

    @property
    def url(self) -> str:
        assert self.decl.url is not None
        return self.decl.url.format(port=self.port, data_dir=self.data_dir)

    @property
    def pid(self) -> int | None:
        return None  # the target's commands know their broker's processes; we do not

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.start_again()

    def start_again(self) -> None:
        self._run("start", self.decl.start or (), signal.SIGTERM)
        self._running = True

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        if self._running:
            self._running = False
            self._run("stop", self.decl.stop or (), sig)

    def close(self) -> None:
        self.stop(signal.SIGKILL)

    def _run(self, key: str, template: Sequence[str], sig: signal.Signals) -> None:
        fields = {"port": self.port, "data_dir": self.data_dir, "signal": sig.name}
        argv = self._resolve(a.format(**fields) for a in template)
        where = f"{self.config_path}: target.broker.{key} command `{shlex.join(argv)}`"
        try:
            done = run_bounded(
                argv, cwd=self.data_dir, env=dict(os.environ), timeout_s=COMMAND_TIMEOUT_S
            )
        except OSError as exc:
            raise ConfigError(f"{where} cannot start ({exc.strerror or exc})") from None
        except Overran:
            raise ConfigError(
                f"{where} ran past {COMMAND_TIMEOUT_S:.0f} s; make it return once the "
                f"broker has {'started' if key == 'start' else 'stopped'}"
            ) from None
        if done.returncode != 0:
            raise ConfigError(
                f"{where} exited {done.returncode}{stderr_tail(done.stderr)}; make it exit 0"
            )
