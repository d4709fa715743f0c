"""The checks every key of ``crashpoint.toml`` goes through, shared by the schema's
parts: each failure is one :class:`ConfigError` line naming the file, the key and the fix."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.contract.errors import ConfigError

#: How the fix for a wrong or missing value reads: ``write KEY = EXAMPLE``.
EXAMPLES = {
    "name": '"billing-agent"',
    "command": '["node", "worker.js"]',
    "relay": '["node", "relay.js"]',
    "workers": "2",
    "lease_ttl_s": "1.0",
    "term_grace_s": "2.0",
    "poll_s": "0.5",
    "min_backoff_s": "0.1",
    "visibility_s": "30.0",
    "upgraded_command": '["node", "worker.js", "--v2"]',
    "cancel": '["node", "cancel.js", "{job_id}"]',
    "enqueue": '["node", "enqueue.js", "{job_id}", "{payload_file}"]',
    "max_attempts": "3",
    "status": '["node", "status.js", "{job_id}"]',
    "dsn": '"sqlite:///state/ledger.db"',
    "kind": '"idempotent"',
    "image": '"billing-worker:1"',
    "build": '"."',
    "workdir": '"/app"',
    "user": '"1000:1000"',
    "env": '{ LOG_LEVEL = "debug" }',
    "mounts": '["./fixtures:/fixtures:ro"]',
    "sensitive_fields": '["customer_email", "api_token"]',
}
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
#: An environment variable's name, as a shell accepts it.
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class TableReader:
    """Checks one document; ``prefix`` is where its tables live (``tool.crashpoint.``)."""

    def __init__(self, path: Path, prefix: str) -> None:
        self.path = path
        self.prefix = prefix

    @property
    def base_dir(self) -> Path:
        """Where relative paths in the file start: the file's own directory."""
        return self.path.resolve().parent

    def fail(self, key: str, problem: str, fix: str) -> ConfigError:
        return ConfigError(f"{self.path}: {self.prefix}{key} {problem}; {fix}")

    def known(
        self, table: Mapping[str, Any], where: str, keys: tuple[str, ...], *, label: str
    ) -> None:
        for key in table:
            if key not in keys:
                near = difflib.get_close_matches(str(key), keys, n=1, cutoff=0.6)
                raise self.fail(
                    f"{where}{key_name(key)}",
                    "is not a known key" + (f" (did you mean {shown(near[0])}?)" if near else ""),
                    f"{label} allows {', '.join(keys)}",
                )

    def subtable(self, value: object, key: str, keys: tuple[str, ...]) -> Mapping[str, Any] | None:
        """``[target.KEY]`` checked to be a table of only ``keys``; None when absent."""
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.fail(
                f"target.{key}", f"must be a table, got {shown(value)}", f"write [target.{key}]"
            )
        self.known(value, f"target.{key}.", keys, label=f"[target.{key}]")
        return value

    def string(
        self, table: Mapping[str, Any], where: str, key: str, *, example: str | None = None
    ) -> str:
        example = example or EXAMPLES[key]
        value = table.get(key)
        if value is None:
            raise self.fail(f"{where}{key}", "is missing", f"add {key} = {example}")
        if not isinstance(value, str) or not value:
            raise self.wrong(where, key, value, "a non-empty string", example=example)
        return value

    def integer(self, table: Mapping[str, Any], where: str, key: str, *, default: int) -> int:
        value = table.get(key, default)
        if not is_int(value):
            raise self.wrong(where, key, value, "a whole number")
        return int(value)

    def number(self, table: Mapping[str, Any], where: str, key: str, *, default: float) -> float:
        value = table.get(key, default)
        if not (is_int(value) or isinstance(value, float)):
            raise self.wrong(where, key, value, "a number")
        return float(value)

    def seconds(
        self,
        target: Mapping[str, Any],
        key: str,
        bounds: tuple[float, float],
        fix: str,
    ) -> float | None:
        """``[target] key``, a number of seconds within ``bounds``; None when the target
        declares none."""
        if key not in target:
            return None
        value = self.number(target, "target.", key, default=0.0)
        low, high = bounds
        if not low <= value <= high:
            raise self.fail(
                f"target.{key}",
                f"must be seconds from {low} to {high:.0f}, got {shown(target[key])}",
                fix,
            )
        return value

    def wrong(
        self, where: str, key: str, value: object, what: str, *, example: str | None = None
    ) -> ConfigError:
        return self.fail(
            f"{where}{key}",
            f"must be {what}, got {shown(value)} ({toml_type(value)})",
            f"write {key} = {example or EXAMPLES[key]}",
        )

    def optional(
        self,
        table: Mapping[str, Any],
        where: str,
        key: str,
        valid: Callable[[str], object],
        problem: str,
        fix: str,
    ) -> str | None:
        """An optional string key, checked by ``valid``; None when absent."""
        if key not in table:
            return None
        value = self.string(table, where, key)
        if not valid(value):
            raise self.fail(f"{where}{key}", f"{shown(value)} {problem}", fix)
        return value


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def toml_type(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def shown(value: object) -> str:
    """A value as the file (TOML) or the line (JSON) spells it: ``"two"``, ``true``."""
    return json.dumps(value, ensure_ascii=False, default=str)


def key_name(key: str) -> str:
    """A key as TOML spells it: bare when it can be, else quoted (a key may hold a
    newline, and the error about it is still one line)."""
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)


def clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
