"""``[target.preload]``: modules a Python worker imports once per run, not once per start.

A worker that imports a framework pays that import at every start: a trial starts two
or three workers, a matrix a hundred. With ``modules`` declared, the run keeps one
process of the worker's own interpreter with those modules imported (a zygote,
:mod:`harness.backends.zygote`) and forks each worker from it, where the worker's start
allows (``python script.py`` or ``python -m module``, the same interpreter and the same
interpreter settings; anything else starts as before)."""

from __future__ import annotations

import re

from harness.targets.config_reader import TableReader, shown

PRELOAD_KEYS = ("modules",)
PRELOAD_EXAMPLE = '["mcp", "httpx"]'
#: A dotted module name, as ``import`` spells it.
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class PreloadSchema(TableReader):
    """``[target.preload]``: the modules, checked to be importable names."""

    def preload(self, table: object) -> tuple[str, ...]:
        """``modules`` in order, without repeats; empty when the table is absent."""
        checked = self.subtable(table, "preload", PRELOAD_KEYS)
        if checked is None:
            return ()
        if "modules" not in checked:
            raise self.fail(
                "target.preload.modules", "is missing", f"add modules = {PRELOAD_EXAMPLE}"
            )
        value = checked["modules"]
        if not isinstance(value, list) or not value or not all(isinstance(m, str) for m in value):
            raise self.fail(
                "target.preload.modules",
                f"must be a non-empty list of module names, got {shown(value)}",
                f"write modules = {PRELOAD_EXAMPLE}",
            )
        for name in value:
            if not _MODULE.match(name):
                raise self.fail(
                    "target.preload.modules",
                    f"holds {shown(name)}, which is not a module name",
                    'write names as import spells them, such as "email.mime" (no paths, no .py)',
                )
        return tuple(dict.fromkeys(value))
