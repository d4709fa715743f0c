"""``[target.broker]``: the broker a queue's workers take their jobs from, which the
harness starts for each trial and ``broker_restart`` restarts (docs/injection-table.md).

```toml
[target.broker]
kind = "redis"          # the harness starts redis-server per trial, on 127.0.0.1
env = "REDIS_URL"       # the variable worker, enqueue and status read its URL from
```
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.brokers import KINDS
from harness.targets.config_reader import ENV_NAME, TableReader, shown

BROKER_KEYS = ("kind", "env")
#: Variables the harness sets itself: a broker's URL must not overwrite one of them.
_RESERVED_PREFIX = "CRASHPOINT_"


@dataclass(frozen=True)
class BrokerDecl:
    """A broker the harness starts per trial: its kind, and the variable its URL goes in."""

    kind: str
    env: str


class BrokerSchema(TableReader):
    """The ``[target.broker]`` part of the schema."""

    def broker(self, value: object) -> BrokerDecl | None:
        broker = self.subtable(value, "broker", BROKER_KEYS)
        if broker is None:
            return None
        where = "target.broker."
        kind = self.string(broker, where, "kind", example='"redis"')
        if kind not in KINDS:
            raise self.fail(
                f"{where}kind",
                f"{shown(kind)} is not a broker the harness can start",
                f"write kind = {shown(KINDS[0])} (the kinds: {', '.join(KINDS)})",
            )
        env = self.string(broker, where, "env", example='"REDIS_URL"')
        if not ENV_NAME.fullmatch(env) or env.startswith(_RESERVED_PREFIX):
            raise self.fail(
                f"{where}env",
                f"{shown(env)} is not a variable the broker's URL can go in",
                "name your worker's own variable (letters, digits and _, not CRASHPOINT_*), "
                'like env = "REDIS_URL"',
            )
        return BrokerDecl(kind=kind, env=env)
