"""``[target]`` keys that the rows of faults from the field read (issue 34,
docs/injection-table.md): a least backoff, a queue's own visibility window, a pool, the
worker's upgraded command and a job's cancel command."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness.targets.config_reader import TableReader

#: A backoff past the trial's bound could never be seen to end.
BACKOFF_RANGE_S = (0.001, 10.0)
#: A visibility window is bounded like a lease.
VISIBILITY_RANGE_S = (0.05, 600.0)


class FieldFaultSchema(TableReader):
    """``min_backoff_s``, ``visibility_s``, ``pool``, ``upgraded_command`` and
    ``cancel``, each optional."""

    if TYPE_CHECKING:
        # The document's schema reads argvs and per-job templates (targets/config.py).
        def argv(self, target: Mapping[str, Any], key: str) -> tuple[str, ...]: ...

        def template(self, target: Mapping[str, Any], key: str) -> tuple[str, ...]: ...

    def field_faults(self, target: Mapping[str, Any]) -> dict[str, Any]:
        """What the rows of faults from the field read (docs/injection-table.md): a
        least backoff, a queue's own visibility window, a pool."""
        return {
            "min_backoff_s": self.seconds(
                target,
                "min_backoff_s",
                BACKOFF_RANGE_S,
                "write the least your worker waits before it retries a refused write, for "
                "example min_backoff_s = 0.1, or leave it out",
            ),
            "visibility_s": self.seconds(
                target,
                "visibility_s",
                VISIBILITY_RANGE_S,
                "write how long your queue hides a claimed job before it delivers it again, "
                "for example visibility_s = 30.0, or leave it out when that is the lease",
            ),
            "pool": self.flag(target, "pool"),
            "upgraded_command": self.upgraded_command(target),
            "cancel": self.template(target, "cancel") if "cancel" in target else None,
        }

    def upgraded_command(self, target: Mapping[str, Any]) -> tuple[str, ...] | None:
        """The worker's next release, started like ``command`` (once per worker)."""
        if "upgraded_command" not in target:
            return None
        argv = self.argv(target, "upgraded_command")
        if any("{job_id}" in a or "{payload_file}" in a for a in argv):
            raise self.fail(
                "target.upgraded_command",
                "names a job, but it is started once per worker, like command",
                "pass jobs through enqueue instead",
            )
        return argv

    def flag(self, target: Mapping[str, Any], key: str) -> bool:
        """``[target] key``, true or false; false when absent."""
        value = target.get(key, False)
        if not isinstance(value, bool):
            raise self.wrong("target.", key, value, "true or false", example="true")
        return value
