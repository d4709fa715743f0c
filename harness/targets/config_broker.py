"""``[target.broker]``: the broker a queue's workers take their jobs from, started for
each trial and restarted by ``broker_restart`` (docs/injection-table.md).

```toml
[target.broker]
kind = "redis"          # the harness starts redis-server per trial, on 127.0.0.1
env = "REDIS_URL"       # the variable worker, enqueue and status read its URL from

[target.broker]         # or: the target's own commands (harness/targets/broker_commands.py)
start = ["./broker.sh", "start", "{port}", "{data_dir}"]
stop = ["./broker.sh", "stop", "{port}", "{data_dir}", "{signal}"]
url = "redis://127.0.0.1:{port}/0"
env = "REDIS_URL"
```
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.brokers import KINDS
from harness.targets.config_reader import ENV_NAME, TableReader, shown

BROKER_KEYS = ("kind", "env", "start", "stop", "url")
#: What the target's own commands are given, by key.
COMMAND_FIELDS = {
    "start": ("port", "data_dir"),
    "stop": ("port", "data_dir", "signal"),
    "url": ("port", "data_dir"),
}
#: Variables the harness sets itself: a broker's URL must not overwrite one of them.
_RESERVED_PREFIX = "CRASHPOINT_"
_WHERE = "target.broker."


@dataclass(frozen=True)
class BrokerDecl:
    """A broker started per trial: by the harness (``kind = "redis"``), or by the
    target's ``start`` and ``stop`` commands (``kind = "command"``); ``env`` is the
    variable its URL goes in."""

    kind: str
    env: str
    start: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    url: str | None = None


class BrokerSchema(TableReader):
    """The ``[target.broker]`` part of the schema."""

    def broker(self, value: object) -> BrokerDecl | None:
        broker = self.subtable(value, "broker", BROKER_KEYS)
        if broker is None:
            return None
        env = self.string(broker, _WHERE, "env", example='"REDIS_URL"')
        if not ENV_NAME.fullmatch(env) or env.startswith(_RESERVED_PREFIX):
            raise self.fail(
                f"{_WHERE}env",
                f"{shown(env)} is not a variable the broker's URL can go in",
                "name your worker's own variable (letters, digits and _, not CRASHPOINT_*), "
                'like env = "REDIS_URL"',
            )
        own = [k for k in ("start", "stop", "url") if k in broker]
        if not own:
            return BrokerDecl(kind=self._kind(broker), env=env)
        if "kind" in broker or len(own) < 3:
            raise self.fail(
                "target.broker",
                "mixes a kind the harness starts with commands of its own"
                if "kind" in broker
                else f"has {', '.join(own)} but not all of start, stop and url",
                'keep kind = "redis", or give start, stop and url without kind',
            )
        return BrokerDecl(
            kind="command",
            env=env,
            start=self._command(broker, "start"),
            stop=self._command(broker, "stop"),
            url=self._filled(self.string(broker, _WHERE, "url", example=EXAMPLE_URL), "url"),
        )

    def _kind(self, broker: Mapping[str, Any]) -> str:
        kind = self.string(broker, _WHERE, "kind", example='"redis"')
        if kind not in KINDS:
            raise self.fail(
                f"{_WHERE}kind",
                f"{shown(kind)} is not a broker the harness can start",
                f"write kind = {shown(KINDS[0])}, or give start, stop and url commands",
            )
        return kind

    def _command(self, broker: Mapping[str, Any], key: str) -> tuple[str, ...]:
        value = broker[key]
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(a, str) and a for a in value)
        ):
            raise self.wrong(
                _WHERE,
                key,
                value,
                "a list of non-empty strings (an argv)",
                example=f'["./broker.sh", "{key}", "{{port}}"]',
            )
        return tuple(self._filled(a, key) for a in value)

    def _filled(self, text: str, key: str) -> str:
        """``text`` if it uses only the placeholders ``key`` is given."""
        allowed = COMMAND_FIELDS[key]
        try:
            names = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
        except ValueError:
            raise self.fail(
                f"{_WHERE}{key}",
                f"has an unmatched brace in {shown(text)}",
                "write {{ or }} for a literal brace",
            ) from None
        bad = [n for n in names if n not in allowed]
        if bad:
            raise self.fail(
                f"{_WHERE}{key}",
                f"has unknown placeholder {{{bad[0]}}} in {shown(text)}",
                f"use {', '.join('{' + a + '}' for a in allowed)} (write {{{{ for a brace)",
            )
        return text


EXAMPLE_URL = '"redis://127.0.0.1:{port}/0"'
