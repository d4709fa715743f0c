"""``[target.serve]``: the enqueue and status commands as long-lived processes, one per
trial each (or one per run, ``scope = "run"``), speaking one JSON line per call
(:mod:`harness.targets.serve` has the protocol). Each key is optional; a served command
stands in for its one-shot form, so ``enqueue`` may then be left out of ``[target]``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.targets.config_reader import TableReader, shown

SERVE_KEYS = ("enqueue", "status")
#: How long a served process lives: a trial (the default), or the whole run.
SCOPES = ("trial", "run")
SERVE_EXAMPLE = '["python3", "commands.py", "--serve"]'


class ServeSchema(TableReader):
    """``[target.serve]``: each op's argv, started once, never given a job on its line."""

    def serve(self, table: object) -> dict[str, tuple[str, ...]]:
        if table is None:
            return {}
        if not isinstance(table, dict):
            raise self.fail(
                "target.serve", f"must be a table, got {shown(table)}", "write [target.serve]"
            )
        self.known(table, "target.serve.", (*SERVE_KEYS, "scope"), label="[target.serve]")
        return {op: self._argv(table, op) for op in SERVE_KEYS if op in table}

    def _argv(self, table: Mapping[str, Any], op: str) -> tuple[str, ...]:
        value = table[op]
        key = f"target.serve.{op}"
        if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
            raise self.fail(
                key,
                f"must be a non-empty list of strings, got {shown(value)}",
                f"write {op} = {SERVE_EXAMPLE}",
            )
        if any(f"{{{p}}}" in a for a in value for p in ("job_id", "payload_file")):
            raise self.fail(
                key,
                "names a job, but it is started once per trial, not per job",
                "read the job from each request line instead",
            )
        return tuple(value)

    def serve_scope(self, table: object) -> str:
        """``scope``: "trial" unless the table says "run" (checked after :meth:`serve`)."""
        if not isinstance(table, dict) or "scope" not in table:
            return "trial"
        scope = table["scope"]
        if scope not in SCOPES:
            raise self.fail(
                "target.serve.scope",
                f'must be "trial" or "run", got {shown(scope)}',
                'write scope = "run" for one process per run, or leave it out',
            )
        if not any(op in table for op in SERVE_KEYS):
            raise self.fail(
                "target.serve.scope", "is set, but nothing is served", "add enqueue or status"
            )
        return str(scope)
