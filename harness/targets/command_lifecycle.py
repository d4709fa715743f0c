"""The commands a command target may declare for the rows that change its worker's life
(issue 34, docs/injection-table.md): ``[target] upgraded_command``, the worker's next
release, which the recovering workers of ``upgrade_during_recovery`` start from; and
``[target] cancel``, run per job in ``cancel_in_flight``.

A mixin of :class:`~harness.targets.command.CommandAdapter`, apart so that module stays
small. A cancel command is the user's, like enqueue and status: one that fails is a
configuration error (exit 2), and its exit 0 is the target's acknowledgement, the
moment from which no new attempt of the job may make an effect.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.targets.command_calls import CommandCalls
    from harness.targets.config import CommandConfig

#: How long a cancel command may take: as long as an enqueue.
CANCEL_TIMEOUT_S = 10.0


class LifecycleCommands:
    """``upgraded_argv`` and ``cancel`` for a target described by a config."""

    config: CommandConfig
    in_image: bool

    if TYPE_CHECKING:

        def _abs(self, args: Iterable[str]) -> list[str]: ...

        def _command_env(self) -> dict[str, str]: ...

        _calls: CommandCalls

    def upgraded_argv(self) -> list[str] | None:
        """The upgraded worker's command, as :meth:`worker_argv` gives the worker's; None
        when the target declares none."""
        argv = self.config.upgraded_command
        if argv is None:
            return None
        return list(argv) if self.in_image else self._abs(argv)

    def cancel(self, job_id: str) -> bool:
        """Run the declared cancel command for ``job_id``; True once it exited 0, False
        when the target declares none."""
        if self.config.cancel is None:
            return False
        self._calls.run(
            "cancel",
            self.config.cancel,
            job_id,
            self._command_env(),
            CANCEL_TIMEOUT_S,
            "make it exit 0 once the job's cancellation is recorded",
        )
        return True


def declared_note(config: CommandConfig) -> str | None:
    """What check-config says of the declared commands (None: neither is declared)."""
    said = [
        f"target.{key} `{' '.join(argv)}` ({row} runs)"
        for key, argv, row in (
            ("upgraded_command", config.upgraded_command, "upgrade_during_recovery"),
            ("cancel", config.cancel, "cancel_in_flight"),
        )
        if argv is not None
    ]
    return f"declared: {'; '.join(said)}" if said else None
